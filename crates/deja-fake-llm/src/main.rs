//! `deja-fake-llm`: the fake as a process, for benchmarks and demos.
//! Answers every request with `Reply::Auto` after `--latency-ms`.

use clap::Parser;
use deja_fake_llm::FakeLlm;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "A deterministic OpenAI-compatible chat completions server")]
struct Args {
    /// Port to listen on (0 = any free port).
    #[arg(long, default_value_t = 8089)]
    port: u16,
    /// Address to bind; loopback by default since the fake has no authentication.
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    /// Added before every answer, to model a slow model.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let fake = FakeLlm::bind(SocketAddr::new(args.host, args.port)).await?;
    fake.set_latency(Duration::from_millis(args.latency_ms));
    println!("deja-fake-llm listening on {}", fake.base_url());
    tokio::signal::ctrl_c().await?;
    fake.shutdown();
    Ok(())
}
