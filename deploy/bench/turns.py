#!/usr/bin/env python3
"""Generates realistic, distinct turn events (schema/turn-event.v1.json) for the ingest bench.

    deploy/bench/turns.py --org ORG [--conversations 50] [--turns 4] [--seed 1] > turns.jsonl

Each conversation is one of ten incident scenarios (alert, wrong first hypothesis, revised
diagnosis, fix, confirmation) filled with conversation-specific services, hosts, numbers and
times, so no two turns share their text and every episode gets its own embedding. Tool calls
carry realistic outputs (1-3 KB per event in total). Events are written round-robin by turn
index (every conversation's turn 1, then every turn 2, ...), the way turns of concurrent
investigations arrive minutes apart, so concurrent workers rarely hold two turns of the same
conversation at once. Deterministic for a given seed. Standard library only.
"""

import argparse
import datetime as dt
import json
import random

SERVICES = [
    "checkout", "payments-gateway", "orders-api", "search-indexer", "auth-service",
    "notification-worker", "cart-api", "recommendations", "shipping-rates", "billing-batch",
    "inventory-sync", "pricing-engine", "ledger-writer", "media-resizer", "feature-store",
    "fraud-scorer", "profile-api", "email-sender", "catalog-api", "session-broker",
]
TEAMS = ["sre-platform", "payments", "storefront", "data-platform", "ml-serving"]
REGIONS = ["eu-west-1", "us-east-1", "us-west-2", "ap-southeast-2"]

# Each scenario: turn texts with {placeholders}; the fourth answer carries "Root cause:" and
# "confirmed"/"fixed" so the episode ends resolved.
SCENARIOS = [
    {
        "alert": "PodsOOMKilled", "kind": "cluster", "comp": "k8s-{region}",
        "tools": ("kubectl_get_pods", "infrastructure-kubernetes"),
        "u1": "[FIRING:{n1}] {Alert} severity=critical service={svc} cluster=k8s-{region}\n"
              "{n1} pods of {svc} restarted with exit code 137 in the last {m1} minutes. "
              "Can you check what is going on?",
        "a1": "{svc} pods are being OOMKilled: the container hits its {lim}Mi limit roughly "
              "{m1} minutes after start. My first guess is a traffic spike, since request rate "
              "is up {pct}% against last week; I have not looked at the heap profile yet.",
        "u2": "Traffic is normal for a {day}. Could it be the release from this morning?",
        "a2": "Traffic is ruled out: the per-pod request rate is flat at {rps} req/s. The "
              "release {ver} bumped the JSON library and the heap dump shows {mb} MB of "
              "retained parser buffers per pod that never get freed. That matches the "
              "memory growth of about {growth} MiB per minute.",
        "u3": "We rolled back {svc} to the previous version on half the pods. How do they look?",
        "a3": "The rolled-back pods are stable at {stable} MiB after {m2} minutes while the "
              "pods on {ver} keep climbing and one more was killed. The buffer leak in {ver} "
              "is the most likely cause; I'd roll back the rest.",
        "u4": "Full rollback is done and the library fix is merged. Can we close?",
        "a4": "Yes. Root cause: release {ver} of {svc} upgraded the JSON library, which "
              "retains parser buffers and leaks about {growth} MiB per minute until the {lim}Mi "
              "limit OOMKills the pod. Confirmed: after the rollback no pod restarted for "
              "{m3} minutes and memory is flat; fixed for good by the patched library.",
    },
    {
        "alert": "HighErrorRate5xx", "kind": "database", "comp": "{svc}-db",
        "tools": ("prometheus_query_range", "observability-prometheus"),
        "u1": "[FIRING:1] {Alert} service={svc} database={svc}-db error_ratio=0.{n2} "
              "region={region}\nCustomers see HTTP 500 on {svc}. Please investigate.",
        "a1": "{svc} returns 500s on {pct}% of requests since {hh}:{mm} UTC. The errors are "
              "'connection pool exhausted' from the {svc}-db client. I first suspect a slow "
              "query holding connections; next I will look at pg_stat_activity.",
        "u2": "DBA says there are no slow queries. What else holds the connections?",
        "a2": "Slow queries are ruled out: the longest query ran {ms} ms. {conns} of "
              "{poolmax} connections sit 'idle in transaction' and all come from the {job} "
              "job that started at {hh}:{mm}. It opens a transaction per batch and never "
              "commits on the error path.",
        "u3": "We paused the {job} job. Error rate?",
        "a3": "Errors dropped from {pct}% to 0.{n3}% within {m2} minutes of pausing {job}, "
              "and idle-in-transaction connections fell to {small}. That supports the leaked "
              "transactions explanation.",
        "u4": "The {job} fix (commit or rollback in a finally block) is deployed and the job "
              "is running again. Close it out?",
        "a4": "Root cause: the {job} job leaked transactions on its error path, leaving "
              "{conns} connections idle in transaction and exhausting the {svc}-db pool of "
              "{poolmax}. Confirmed fixed: with the patched job running for {m3} minutes the "
              "pool peaks at {small} busy connections and {svc} has no 500s.",
    },
    {
        "alert": "CertificateExpiringSoon", "kind": "service", "comp": "{svc}-ingress",
        "tools": ("openssl_s_client", "network-diagnostics"),
        "u1": "[FIRING:1] {Alert} service={svc}-ingress host={svc}.example.com days_left=0\n"
              "External probes from {region} fail with TLS errors.",
        "a1": "TLS handshakes to {svc}.example.com fail: the served certificate expired at "
              "{hh}:{mm} UTC today. I suspect the renewal job did not run; next I will "
              "check cert-manager's Certificate resource for {svc}.",
        "u2": "cert-manager shows the renewal as Ready. Why is the old cert still served?",
        "a2": "The renewal did run: the secret {svc}-tls holds a certificate valid for {days} "
              "days. But the {n1} ingress pods still serve the old one because the ingress "
              "controller version {ver} does not reload secrets updated in place.",
        "u3": "We restarted one ingress pod. Does it serve the new certificate?",
        "a3": "Yes, the restarted pod serves the new certificate (notAfter in {days} days) "
              "and its probe from {region} is green; the other {n1} pods still serve the "
              "expired one.",
        "u4": "All ingress pods rolled and the controller is upgraded past {ver}. Done?",
        "a4": "Root cause: ingress controller {ver} did not hot-reload the renewed {svc}-tls "
              "secret, so the expired certificate stayed in memory. Confirmed: all probes green "
              "for {m3} minutes, and the upgraded controller reloads secrets; fixed.",
    },
    {
        "alert": "DiskSpaceCritical", "kind": "host", "comp": "{svc}-node-{n1}",
        "tools": ("ssh_df", "infrastructure-linux"),
        "u1": "[FIRING:1] {Alert} host={svc}-node-{n1} mountpoint=/var used=9{n2}%\n"
              "Writes from {svc} start failing with ENOSPC.",
        "a1": "/var on {svc}-node-{n1} is at 9{n2}% and {svc} logs ENOSPC on its spool "
              "directory. I suspect log growth after the log level change last week; next "
              "I will list the largest directories.",
        "u2": "Logs on {svc}-node-{n1} are rotated hourly. Are you sure it is logs?",
        "a2": "Logs are ruled out: /var/log is {small} GB. The space is in /var/lib/{svc}/"
              "spool: {gb} GB of undelivered batches, because the uploader has failed "
              "since {hh}:{mm} UTC with 403 from the object store after a credential "
              "rotation.",
        "u3": "We re-issued the uploader credentials. Is the spool draining?",
        "a3": "The spool is draining at about {rate} MB/s and usage fell from 9{n2}% to "
              "{pct}% in {m2} minutes. Uploads return 200 again.",
        "u4": "Spool is empty now. Can we close?",
        "a4": "Root cause: the credential rotation at {hh}:{mm} UTC left the {svc} uploader "
              "with a revoked key, so batches piled up in the spool and filled /var. "
              "Confirmed fixed: the spool is empty, usage is back at {pct}%, and the uploader "
              "now reads credentials from the secret store.",
    },
    {
        "alert": "ConsumerLagHigh", "kind": "queue", "comp": "{svc}-events",
        "tools": ("kafka_consumer_groups", "messaging-kafka"),
        "u1": "[FIRING:1] {Alert} service={svc} topic={svc}-events lag={lag}\n"
              "Consumer lag keeps growing; downstream dashboards are {m1} minutes behind.",
        "a1": "Lag on {svc}-events is {lag} messages and growing by about {rate}k per minute. "
              "My first suspicion is that producers doubled their rate; next I will compare "
              "produce and consume rates.",
        "u2": "Producer rate is unchanged. Why are consumers slower?",
        "a2": "Producers are ruled out: {rps} msg/s as every day. Consumers process at "
              "half their usual speed because each message now calls the {dep} service "
              "synchronously, and its p99 rose to {ms} ms after its own deploy {ver}.",
        "u3": "{dep} rolled back {ver}. Is the lag dropping?",
        "a3": "{dep} p99 is back at {small}0 ms and {svc} consumers now run at {rps2} msg/s, "
              "so the lag fell by {pct}% in {m2} minutes.",
        "u4": "Lag is zero. Wrap it up?",
        "a4": "Root cause: {dep} release {ver} raised its p99 to {ms} ms and {svc} consumers "
              "call it synchronously per message, halving consumption of {svc}-events. "
              "Confirmed fixed by the rollback: lag is 0 and has stayed flat for {m3} minutes.",
    },
    {
        "alert": "ReplicationLagHigh", "kind": "database", "comp": "{svc}-replica",
        "tools": ("psql_query", "database-postgres"),
        "u1": "[FIRING:1] {Alert} database={svc}-replica lag_seconds={secs} region={region}\n"
              "Read traffic from {svc} returns stale data.",
        "a1": "The {svc}-replica in {region} is {secs} s behind the primary. I first suspect "
              "network throughput between regions; next I will check WAL send and replay "
              "positions.",
        "u2": "Network team sees no saturation. Anything on the replica itself?",
        "a2": "Network is ruled out: WAL reaches {svc}-replica on time, replay is what lags. "
              "A long-running analytics query on it (running {m1} minutes) holds a "
              "snapshot that conflicts with replay, and hot_standby_feedback is off, so "
              "replay waits up to max_standby_streaming_delay={secs2}s each time.",
        "u3": "We cancelled the analytics query. Is the replica catching up?",
        "a3": "Replay resumed immediately and the lag fell from {secs} s to {small} s in "
              "{m2} minutes.",
        "u4": "Analytics moved to a dedicated replica. Close?",
        "a4": "Root cause: a {m1}-minute analytics query on {svc}-replica conflicted with WAL "
              "replay, stalling it for up to {secs2} s at a time. Confirmed fixed: with "
              "analytics on its own replica the lag stayed under 1 s for {m3} minutes.",
    },
    {
        "alert": "LatencyP99High", "kind": "cache", "comp": "{svc}-redis",
        "tools": ("redis_info", "database-redis"),
        "u1": "[FIRING:1] {Alert} service={svc} cache={svc}-redis p99={secs}00ms\n"
              "Pages served by {svc} are slow since {hh}:{mm} UTC.",
        "a1": "{svc} p99 went from {small}0 ms to {secs}00 ms. Most of the time is spent in "
              "the database, and the cache hit ratio of {svc}-redis fell from 9{n2}% to "
              "{pct}%. I suspect the database first; next I will check why the cache misses.",
        "u2": "The database is just seeing more load. Why is the cache missing?",
        "a2": "The database is a symptom. {svc}-redis is at maxmemory ({gb} GB) and evicting "
              "{rate}k keys per minute. The new {dep} feature writes {mb} KB values without "
              "a TTL into the same instance.",
        "u3": "{dep} now sets a 1 h TTL. How is the hit ratio?",
        "a3": "Evictions stopped {m2} minutes after the change and the hit ratio is back at "
              "9{n2}%; p99 fell to {small}0 ms.",
        "u4": "Stable for an hour. Close it?",
        "a4": "Root cause: {dep} wrote {mb} KB values without TTL into {svc}-redis, filling "
              "it to maxmemory so LRU evicted hot keys and {svc} fell through to the database. "
              "Confirmed fixed by the TTL: no evictions for {m3} minutes.",
    },
    {
        "alert": "CronJobMissed", "kind": "pipeline", "comp": "{svc}-nightly",
        "tools": ("kubectl_get_cronjobs", "infrastructure-kubernetes"),
        "u1": "[FIRING:1] {Alert} pipeline={svc}-nightly last_success_hours={hours}\n"
              "The nightly {svc} export did not run; finance reports are empty.",
        "a1": "{svc}-nightly last succeeded {hours} hours ago. I suspect the job failed and "
              "was not retried; next I will look at its last runs.",
        "u2": "There are no failed runs at all in the history.",
        "a2": "Right, it never started: the CronJob is suspended since {hh}:{mm} UTC "
              "{days} days ago, when a migration script set suspend=true to freeze writes "
              "and the matching unsuspend step failed silently.",
        "u3": "We unsuspended it and triggered a manual run. Status?",
        "a3": "The manual run finished in {m2} minutes and exported {rows} rows; the next "
              "scheduled run is at 02:00 UTC.",
        "u4": "Scheduled run succeeded too. Close it?",
        "a4": "Root cause: the migration of {days} days ago suspended {svc}-nightly and its "
              "unsuspend step failed silently. Confirmed fixed: the scheduled run succeeded "
              "with {rows} rows, and an alert on suspended CronJobs was added.",
    },
    {
        "alert": "RateLimited429", "kind": "service", "comp": "{dep}",
        "tools": ("http_probe", "network-diagnostics"),
        "u1": "[FIRING:1] {Alert} service={svc} upstream={dep} status_429_ratio=0.{n2}\n"
              "Users of {svc} get 'Too Many Requests' from {dep}.",
        "a1": "{pct}% of {svc}'s calls to {dep} return 429. I first suspect our own traffic "
              "grew; next I will compare call rates with last week.",
        "u2": "Our traffic is flat. Did {dep} lower the limit?",
        "a2": "Our request volume is flat at {rps} req/s, but the number of distinct client "
              "IDs fell from {n1} to 1: release {ver} of {svc} shares one API client across "
              "all tenants, so the per-client limit of {rps2} req/s applies to everything.",
        "u3": "Hotfix restores per-tenant clients on one canary. Results?",
        "a3": "On the canary 429s fell from {pct}% to 0 within {m2} minutes.",
        "u4": "Hotfix is everywhere. Close?",
        "a4": "Root cause: {svc} release {ver} shared one {dep} API client across tenants, so "
              "the per-client rate limit of {rps2} req/s throttled all traffic. Confirmed fixed: "
              "no 429s for {m3} minutes since the hotfix.",
    },
    {
        "alert": "DNSResolutionFailures", "kind": "service", "comp": "coredns",
        "tools": ("dig", "network-diagnostics"),
        "u1": "[FIRING:1] {Alert} service={svc} cluster=k8s-{region} nxdomain_ratio=0.{n2}\n"
              "{svc} cannot resolve {dep}.internal intermittently.",
        "a1": "{pct}% of lookups of {dep}.internal from {svc} fail with SERVFAIL or time out. "
              "I suspect the {dep} service record was removed; next I will query coredns "
              "directly.",
        "u2": "The record exists, we checked. What else?",
        "a2": "The record is fine when coredns answers. {n1} of the coredns pods are "
              "CPU-throttled at their {mcpu}m limit since the node pool grew to {nodes} nodes, "
              "and each pod drops queries when its queue fills.",
        "u3": "We raised the coredns CPU limit and added two replicas. Better?",
        "a3": "SERVFAILs dropped from {pct}% to 0.0{n3}% within {m2} minutes and coredns "
              "p99 is {small} ms.",
        "u4": "It held overnight. Close?",
        "a4": "Root cause: coredns was CPU-throttled at {mcpu}m after the cluster grew to "
              "{nodes} nodes, so it dropped queries for {dep}.internal. Confirmed fixed: "
              "autoscaling coredns kept failures at zero for {m3} minutes.",
    },
]

DEPS = ["vault", "geo-lookup", "tax-service", "partner-api", "identity-provider",
        "currency-rates", "address-validator", "risk-engine"]
JOBS = ["reconciliation", "nightly-export", "reindex", "usage-rollup", "invoice-sync"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def camel(text):
    return "".join(part.capitalize() for part in text.split("-"))


def values(rng, conv, svc, region):
    return {
        "svc": svc, "region": region, "dep": rng.choice(DEPS), "job": rng.choice(JOBS),
        "day": rng.choice(DAYS), "ver": f"v{rng.randint(2, 9)}.{rng.randint(0, 30)}.{conv}",
        "n1": rng.randint(3, 9), "n2": rng.randint(1, 9), "n3": rng.randint(1, 9),
        "m1": rng.randint(8, 55), "m2": rng.randint(3, 15), "m3": rng.randint(30, 240),
        "pct": rng.randint(12, 80), "lim": rng.choice([512, 768, 1024, 2048]),
        "rps": rng.randint(200, 4000), "rps2": rng.randint(50, 900), "mb": rng.randint(40, 900),
        "growth": rng.randint(4, 60), "stable": rng.randint(180, 700),
        "ms": rng.randint(800, 9000), "conns": rng.randint(40, 200),
        "poolmax": rng.choice([50, 100, 200]), "small": rng.randint(2, 9),
        "hh": f"{rng.randint(0, 23):02d}", "mm": f"{rng.randint(0, 59):02d}",
        "days": rng.randint(2, 89), "gb": rng.randint(8, 120), "rate": rng.randint(3, 90),
        "lag": rng.randint(100_000, 9_000_000), "secs": rng.randint(3, 40),
        "secs2": rng.choice([30, 60, 120]), "hours": rng.randint(26, 74),
        "rows": rng.randint(10_000, 2_000_000), "mcpu": rng.choice([100, 200, 250]),
        "nodes": rng.randint(120, 600), "conv": conv,
    }


def tool_output(rng, name, v, turn):
    start = dt.datetime(2026, 3, 1, int(v["hh"]), int(v["mm"]))
    lines = []
    if name.startswith("prometheus") or name in ("http_probe", "redis_info", "psql_query"):
        lines.append("time                 value")
        base = rng.uniform(0.5, 50.0)
        for step in range(12):
            at = start + dt.timedelta(seconds=30 * step)
            base *= rng.uniform(0.85, 1.35 if turn < 3 else 1.0)
            lines.append(f"{at:%H:%M:%S}             {base:.3f}")
    elif name.startswith("kubectl"):
        lines.append("NAME                                READY   STATUS      RESTARTS   AGE")
        for pod in range(v["n1"]):
            suffix = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz0123456789") for _ in range(5))
            status = rng.choice(["Running", "Running", "OOMKilled", "CrashLoopBackOff"])
            lines.append(f"{v['svc']}-{rng.randint(1000, 9999)}-{suffix:<12} "
                         f"{rng.randint(0, 1)}/1     {status:<11} {rng.randint(0, 14):<10} "
                         f"{rng.randint(1, 40)}d")
    else:
        for n in range(8):
            at = start + dt.timedelta(seconds=7 * n)
            lines.append(f"{at:%Y-%m-%dT%H:%M:%S}Z {v['svc']} {name} "
                         f"sample={rng.randint(0, 99999)} value={rng.uniform(0, 100):.2f}")
    return "\n".join(lines)


def conversation(rng, org, conv, turns):
    scenario = SCENARIOS[conv % len(SCENARIOS)]
    svc = SERVICES[(conv * 7 + conv // len(SERVICES)) % len(SERVICES)]
    if conv >= len(SERVICES):
        svc = f"{svc}-{conv // len(SERVICES) + 1}"
    region = REGIONS[conv % len(REGIONS)]
    team = TEAMS[conv % len(TEAMS)]
    v = values(rng, conv, svc, region)
    v["Alert"] = f"{camel(svc)}{scenario['alert']}"
    correlation_id = f"bench-conv-{conv:04d}"
    started = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=7 * conv)
    events = []
    for turn in range(1, turns + 1):
        k = min(turn, 4)
        user = scenario[f"u{k}"].format(**v)
        answer = scenario[f"a{k}"].format(**v)
        if turn > 4:  # longer conversations: follow-up questions after the close
            user = f"Follow-up {turn - 4} on {svc}: anything else to watch for?"
            answer = (f"Keep an eye on {svc} for the next {v['m3'] + turn} minutes; "
                      f"the fix from turn 4 is holding.")
        tool_name, skill = scenario["tools"]
        calls = []
        for c in range(2):
            name = tool_name if c == 0 else "prometheus_query_range"
            calls.append({
                "name": name,
                "skill": skill if c == 0 else "observability-prometheus",
                "input": {"target": svc, "region": region, "window": f"{v['m1'] + c}m",
                          "turn": turn},
                "output": tool_output(rng, name, v, turn),
                "status": "ok",
            })
        at = started + dt.timedelta(minutes=6 * turn)
        events.append({
            "schema_version": 1,
            "event_id": f"evt-{org}-{correlation_id}-{turn}",
            "org": org,
            "team": team,
            "agent_id": f"sre-agent-{team}",
            "correlation_id": correlation_id,
            "agent_run_id": f"run-{correlation_id}-{turn}",
            "turn_index": turn,
            "started_at": (at - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "ended_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "user_message": user,
            "final_answer": answer,
            "tool_calls": calls,
            "trigger": {"signal_type": "alert" if turn == 1 else "chat", "payload": {}},
        })
    return events


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--org", required=True)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    convs = [conversation(rng, args.org, c, args.turns) for c in range(args.conversations)]
    for turn in range(args.turns):
        for events in convs:
            print(json.dumps(events[turn]))


if __name__ == "__main__":
    main()
