//! One test binary for every integration test: one link, one shared harness (`deja_tests`).
//! Needs the services of `deploy/services.sh up`.

mod api;
mod cli;
mod end_to_end;
mod eval;
mod outage;
mod processes;
mod second_look;
mod store;
mod structured;
mod worker;
mod worker_startup;
