#!/usr/bin/env python3
"""Fairness benchmark: one workload, every policy, side by side in one run.

Workload A: one noisy tenant bursts 100 jobs, two quiet tenants send 5 each
shortly after. Workload B: the noisy tenant alone. Run times come from a
seeded distribution, scaled down (1 s here stands for about a minute of
pdfToolbox). Each policy is a real `imposer run` (8 slots, fake pdfToolbox
sleeping each job's run time) against `imposer local`:

* fifo    no cap (8 of 8), strict send order: what "volume wins" looks like;
* fair    no cap, but SQS fair-queue delivery by message group (layer 1 only);
* cap-strict  the seed's cap, 4 of 8, on a strictly ordered queue (layer 2 only);
* cap     fair queues and the seed's cap, 4 of 8 (layers 1 and 2);
* borrow  cap 4 plus borrowing idle slots, 1 slot per host kept in reserve;
* ideal   a max-min fair, work-conserving schedule computed offline from the
          same arrivals and run times (no real run).

Also printed: AWS calls per job, the parent's overhead per job, and the error
of `imposer why`'s predicted start on the cap run.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "scripts" / "fake-pdftoolbox"
SLOTS = 8
#: fifo: strict send order, no cap. fair: fair-queue delivery (layer 1) only.
#: cap-strict: the cap (layer 2) on a strictly ordered queue. cap: layers 1 and 2.
#: borrow: layers 1 and 2 plus borrowing with a reserve of 1.
POLICIES = ("fifo", "fair", "cap-strict", "cap", "borrow")
NOISY, QUIET = "noisy", ("quiet-a", "quiet-b")


def workload(seed: int, noisy: int, quiet: int, quiet_at: float, median: float):
    """Return [(tenant, arrival offset, run seconds)] from a seeded log-normal."""
    rng = random.Random(seed)
    jobs = [(NOISY, 0.0, rng.lognormvariate(0, 0.45) * median) for _ in range(noisy)]
    for tenant in QUIET[: 2 if quiet else 0]:
        jobs += [(tenant, quiet_at, rng.lognormvariate(0, 0.45) * median) for _ in range(quiet)]
    return [(t, a, round(min(max(d, 0.3 * median), 4 * median), 2)) for t, a, d in jobs]


def ideal(jobs, slots=SLOTS):
    """Max-min fair, work-conserving offline schedule: waits per job index and makespan."""
    events = sorted(range(len(jobs)), key=lambda i: jobs[i][1])
    waiting: dict[str, list[int]] = {}
    running: dict[str, int] = {}
    free_at = [(0.0, s) for s in range(slots)]
    heapq.heapify(free_at)
    start: dict[int, float] = {}
    t, pending = 0.0, list(events)
    done_heap: list[tuple[float, str]] = []
    while pending or any(waiting.values()):
        # advance to the next moment a slot is free and a job has arrived
        slot_t, slot = heapq.heappop(free_at)
        while done_heap and done_heap[0][0] <= slot_t:
            _, tenant = heapq.heappop(done_heap)
            running[tenant] -= 1
        t = max(slot_t, t)
        while pending and jobs[pending[0]][1] <= t:
            i = pending.pop(0)
            waiting.setdefault(jobs[i][0], []).append(i)
        if not any(waiting.values()):
            t = jobs[pending[0]][1]
            heapq.heappush(free_at, (t, slot))
            continue
        tenant = min((tn for tn, q in waiting.items() if q),
                     key=lambda tn: (running.get(tn, 0), jobs[waiting[tn][0]][1]))
        i = waiting[tenant].pop(0)
        start[i] = t
        running[tenant] = running.get(tenant, 0) + 1
        heapq.heappush(done_heap, (t + jobs[i][2], tenant))
        heapq.heappush(free_at, (t + jobs[i][2], slot))
    waits = {i: start[i] - jobs[i][1] for i in start}
    makespan = max(start[i] + jobs[i][2] for i in start)
    return waits, makespan


class Stack:
    """`imposer local` as a subprocess; environment for everything else."""

    def __init__(self, strict: bool = False) -> None:
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                        AWS_DEFAULT_REGION="us-east-1")
        order = ["--strict-order"] if strict else []
        self.proc = subprocess.Popen([sys.executable, "-m", "imposer", "local", "--port", "0",
                                      *order],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=self.env)
        self.env["AWS_ENDPOINT_URL"] = self.proc.stdout.readline().strip().split("=", 1)[1]

    def activate(self) -> None:
        os.environ.update({k: v for k, v in self.env.items() if k.startswith("AWS_")})

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def run_policy(stack: Stack, jobs, policy: str, workdir: Path, predict: bool = False) -> dict:
    """Run *jobs* through a real worker under *policy*; return per-job facts and counters."""
    from imposer.state.provision import provision
    from imposer.client import submit
    from imposer.dev.samples import numbered_pdf
    from imposer.settings import Settings
    from imposer.worker.wiring import connect

    tag = uuid.uuid4().hex[:8]
    names = dict(queue_name=f"q-{tag}", dlq_name=f"q-{tag}-dlq", bucket=f"b-{tag}",
                 table_prefix=f"bench-{tag}")
    cap = SLOTS if policy in ("fifo", "fair") else 4
    stack.activate()
    settings = Settings.load({}, default_cap=cap, slots=SLOTS, defer_seconds=1.0,
                             heartbeat_seconds=1.0, lease_ttl_seconds=30.0, sweep_seconds=5.0,
                             poll_seconds=1, borrow=policy == "borrow", **names)
    provision(settings)
    pdf = numbered_pdf(workdir / "art.pdf", 2)
    env = dict(stack.env, IMPOSER_QUEUE=names["queue_name"], IMPOSER_DLQ=names["dlq_name"],
               IMPOSER_BUCKET=names["bucket"], IMPOSER_TABLE_PREFIX=names["table_prefix"],
               IMPOSER_DEFAULT_CAP=str(cap), IMPOSER_SLOTS=str(SLOTS), IMPOSER_DEFER_SECONDS="1",
               IMPOSER_HEARTBEAT_SECONDS="1", IMPOSER_LEASE_TTL_SECONDS="30",
               IMPOSER_POLL_SECONDS="1", IMPOSER_PDFTOOLBOX=str(FAKE), IMPOSER_HOST_ID="bench",
               IMPOSER_BORROW="1" if policy == "borrow" else "0")
    log_path = workdir / f"worker-{policy}-{tag}.log"
    ids: dict[str, int] = {}

    def send(indices):
            for i in indices:
                tenant, _, seconds = jobs[i]
                layout = {"version": 1, "kind": "nup", "sheet": {"size": "A4"},
                          "grid": {"cols": 1, "rows": 1},
                          "pdftoolbox": {"profile": "Impose.kfpx",
                                         "variables": {"fake_sleep": str(seconds)}}}
                req = submit(tenant, pdf, layout, bucket=names["bucket"],
                             queue=names["queue_name"])
                ids[req.job_id] = i

    # The burst is queued before the worker starts: it all arrives "at t=0".
    send([i for i, (_, at, _) in enumerate(jobs) if at == 0])
    with open(log_path, "w") as log:
        worker = subprocess.Popen([sys.executable, "-m", "imposer", "run", "--exit-when-idle"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
        while "\"boot\"" not in log_path.read_text():
            time.sleep(0.05)
        t0 = time.time()
        by_arrival: dict[float, list[int]] = {}
        for i, (_, at, _) in enumerate(jobs):
            if at > 0:
                by_arrival.setdefault(at, []).append(i)
        threads = []
        for at, indices in sorted(by_arrival.items()):
            def later(at=at, indices=indices):
                time.sleep(max(0.0, t0 + at - time.time()))
                send(indices)
            threads.append(threading.Thread(target=later))
            threads[-1].start()
        predictions = []
        if predict:
            sampler = threading.Thread(target=_sample_predictions,
                                       args=(settings, worker, predictions), daemon=True)
            sampler.start()
        for th in threads:
            th.join()
        worker.wait(600)
    backends = connect(settings)
    records = {r.job_id: r for r in backends.jobs.list()}
    lines = [json.loads(l) for l in log_path.read_text().splitlines() if l.startswith("{")]
    borrowed = {l["job_id"] for l in lines if l.get("action") == "job_started" and l.get("borrowed")}
    stop = next(l for l in lines if l.get("action") == "stopped")
    return {
        "records": records, "ids": ids, "t0": t0, "borrowed": borrowed,
        "calls": stop.get("aws_calls", {}), "predictions": predictions,
        "dispatch_ms": [l["dispatch_ms"] for l in lines if l.get("action") == "job_started"],
        "settle_ms": [l["settle_ms"] for l in lines if l.get("action") == "job_finished"],
    }


def _sample_predictions(settings, worker, out) -> None:
    """Every second, ask `why` about each waiting job; keep (job, asked at, predicted)."""
    from imposer.reports.why import explain
    from imposer.worker.wiring import connect

    b = connect(settings)
    caps = {}
    while worker.poll() is None:
        now = time.time()
        records = b.jobs.list()
        leases = b.leases.leases()
        for r in records:
            if r.status.value == "queued":
                answer = explain(r.job_id, r, leases, caps, settings.default_cap, records,
                                 SLOTS, settings, now)
                if answer.predicted_start and answer.code in ("at_cap", "pool_full"):
                    out.append((r.job_id, now, answer.predicted_start, answer.code))
        time.sleep(1.0)


def pct(values, q):
    from imposer.reports.stats import percentile

    return percentile(values, q) if values else float("nan")


def overlap(spans):
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                   key=lambda e: (e[0], e[1]))
    held = best = 0
    for _, step in edges:
        held += step
        best = max(best, held)
    return best


def summarise(jobs, result) -> dict:
    recs, ids, t0 = result["records"], result["ids"], result["t0"]
    rows = []
    for job_id, i in ids.items():
        r = recs[job_id]
        rows.append((i, jobs[i][0], r.started_at - t0, r.finished_at - t0, r.queue_wait,
                     job_id in result["borrowed"]))
    quiet = [w for i, t, s, f, w, b in rows if t != NOISY]
    spans = [(s, f) for i, t, s, f, w, b in rows if t == NOISY]
    makespan = max(f for i, t, s, f, w, b in rows)
    busy = sum(f - s for i, t, s, f, w, b in rows)
    eligible = _eligible_time(rows, jobs)
    per_job = len(rows)
    calls = result["calls"]
    return {
        "quiet_p95": pct(quiet, 95), "noisy_max_slots": overlap(spans), "makespan": makespan,
        "util": busy / (SLOTS * eligible) if eligible else float("nan"),
        "receives": calls.get("sqs.ReceiveMessage", 0) / per_job,
        "transactions": calls.get("dynamodb.TransactWriteItems", 0) / per_job,
        "visibility": calls.get("sqs.ChangeMessageVisibility", 0) / per_job,
        "dispatch_ms": pct(result["dispatch_ms"], 50), "settle_ms": pct(result["settle_ms"], 50),
        "rows": rows,
        "predictions": [(j, asked, pred, recs[j].started_at)
                        for j, asked, pred, code in result["predictions"]
                        if j in recs and recs[j].started_at],
    }


def _eligible_time(rows, jobs) -> float:
    """Seconds during which at least SLOTS jobs had arrived and not finished (work eligible)."""
    edges = []
    for i, t, s, f, w, b in rows:
        edges += [(jobs[i][1], 1), (f, -1)]
    edges.sort()
    total, level, last = 0.0, 0, None
    for at, step in edges:
        if last is not None and level > 0:
            total += (at - last) * min(level, SLOTS) / SLOTS
        level += step
        last = at
    return total


def borrowed_bound_ok(jobs, rows) -> tuple[bool, float, float]:
    """No quiet job waits longer than the longest borrowed job running when it arrived."""
    worst_margin, worst_wait, bound_at_worst = float("inf"), 0.0, 0.0
    for i, t, s, f, w, b in rows:
        if t == NOISY:
            continue
        arrive = jobs[i][1]
        running = [f2 - s2 for i2, t2, s2, f2, w2, b2 in rows if b2 and s2 <= arrive < f2]
        bound = max(running, default=0.0)
        margin = bound - w
        if margin < worst_margin:
            worst_margin, worst_wait, bound_at_worst = margin, w, bound
    return worst_margin >= 0, worst_wait, bound_at_worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--median", type=float, default=2.0, help="median run time, seconds")
    parser.add_argument("--noisy", type=int, default=100)
    parser.add_argument("--quiet", type=int, default=5)
    parser.add_argument("--quiet-at", type=float, default=3.0)
    parser.add_argument("--lone", type=int, default=100, help="jobs of the lone-tenant run")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    jobs = workload(args.seed, args.noisy, args.quiet, args.quiet_at, args.median)
    lone = workload(args.seed + 1, args.lone, 0, 0, args.median)
    stack, strict = Stack(), Stack(strict=True)
    out: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for policy in POLICIES:
                print(f"running {policy} ...", file=sys.stderr, flush=True)
                where = strict if policy in ("fifo", "cap-strict") else stack
                out[policy] = summarise(jobs, run_policy(where, jobs, policy, work,
                                                         predict=policy == "cap"))
            lone_runs = {}
            for policy in ("cap", "borrow"):
                print(f"running lone {policy} ...", file=sys.stderr, flush=True)
                lone_runs[policy] = summarise(lone, run_policy(stack, lone, policy, work))
    finally:
        stack.close()
        strict.close()
    waits, ideal_makespan = ideal(jobs)
    ideal_quiet = [w for i, w in waits.items() if jobs[i][0] != NOISY]
    ideal_spans = [(waits[i] + jobs[i][1], waits[i] + jobs[i][1] + jobs[i][2])
                   for i in waits if jobs[i][0] == NOISY]
    report(args, jobs, out, ideal_quiet, ideal_spans, ideal_makespan, lone_runs)
    return 0


def report(args, jobs, out, ideal_quiet, ideal_spans, ideal_makespan, lone_runs) -> None:
    noisy_work = sum(d for t, _, d in jobs if t == NOISY)
    print(f"\nworkload: {args.noisy} noisy jobs at t=0 ({noisy_work:.0f} slot-s), 2 x "
          f"{args.quiet} quiet jobs at t={args.quiet_at:g}s; run times log-normal, median "
          f"{args.median:g}s, seed {args.seed}; {SLOTS} slots; deferral 1 s\n")
    head = (f"{'policy':10} {'quiet p95 wait':>15} {'noisy max slots':>16} {'util (eligible)':>16} "
            f"{'makespan':>9} {'recv/job':>9} {'txn/job':>8} {'vis/job':>8} "
            f"{'dispatch p50':>13} {'settle p50':>11}")
    print(head)
    for policy in POLICIES:
        r = out[policy]
        print(f"{policy:10} {r['quiet_p95']:>14.2f}s {r['noisy_max_slots']:>16} "
              f"{r['util']:>15.0%} {r['makespan']:>8.1f}s {r['receives']:>9.2f} "
              f"{r['transactions']:>8.2f} {r['visibility']:>8.2f} {r['dispatch_ms']:>11.1f}ms "
              f"{r['settle_ms']:>9.1f}ms")
    iq = pct(ideal_quiet, 95)
    print(f"{'ideal':10} {iq:>14.2f}s {overlap(ideal_spans):>16} {'100%':>16} "
          f"{ideal_makespan:>8.1f}s {'(offline)':>9}")
    cap, fifo, borrow = out["cap"], out["fifo"], out["borrow"]
    print(f"\nquiet p95 wait ratios: cap/fifo {cap['quiet_p95'] / fifo['quiet_p95']:.2f}   "
          f"cap/ideal {cap['quiet_p95'] / iq:.2f}   borrow/ideal {borrow['quiet_p95'] / iq:.2f} "
          f"(target <= 1.25)")
    ok, wait, bound = borrowed_bound_ok(jobs, borrow["rows"])
    print(f"borrow: worst quiet wait {wait:.2f}s vs longest borrowed job running at its arrival "
          f"{bound:.2f}s: {'ok' if ok else 'EXCEEDED'}")
    lc, lb = lone_runs["cap"], lone_runs["borrow"]
    print(f"lone heavy tenant ({args.lone} jobs): makespan cap {lc['makespan']:.1f}s, borrow "
          f"{lb['makespan']:.1f}s, ratio {lb['makespan'] / lc['makespan']:.2f} (target <= 0.62; "
          f"bound 4/7 = 0.57); max slots cap {lc['noisy_max_slots']}, borrow "
          f"{lb['noisy_max_slots']}")
    preds = cap.get("predictions") or []
    if preds:
        errors = [abs(pred - actual) for _, _, pred, actual in preds]
        print(f"imposer why on the cap run: {len(errors)} predictions of waiting jobs; start "
              f"error p50 {pct(errors, 50):.2f}s, p90 {pct(errors, 90):.2f}s "
              f"(median run time {args.median:g}s)")


if __name__ == "__main__":
    sys.exit(main())
