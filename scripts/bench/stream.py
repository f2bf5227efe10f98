#!/usr/bin/env python3
"""Large results through routekey-proxy: transfer rate against direct MariaDB, and how much
the proxy's peak resident memory (VmHWM) grows while it relays them, for a fast client and
for one that reads at 1 MiB/s.

Run through scripts/bench-stream.sh. Results come from MariaDB's Sequence engine (no table
data needed): many small rows (`SELECT seq, REPEAT('x', 1000) FROM seq_1_to_N`) and a few
16 MiB rows. The client is the mariadb CLI with --quick (rows are read as they arrive) piped
into a reader that counts bytes and, for the slow cases, reads at a fixed rate, so the
backpressure reaches the proxy through the socket buffers.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

MIB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def read_result(target, sql, rate=None):
    """Runs `sql` with the CLI and reads its output; returns (bytes, seconds)."""
    cmd = ["mariadb", "--no-defaults", "--skip-ssl", "--quick", "--batch", "--skip-column-names",
           "-h127.0.0.1", f"-P{target['port']}", f"-u{target['user']}", target["db"],
           "--max-allowed-packet=1G", "-e", sql]
    if target.get("password"):
        cmd.insert(-2, f"-p{target['password']}")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    total = 0
    chunk = 64 * 1024
    while True:
        data = proc.stdout.read1(chunk) if hasattr(proc.stdout, "read1") else proc.stdout.read(chunk)
        if not data:
            break
        total += len(data)
        if rate:
            # Hold the average at `rate` bytes/s from the start.
            ahead = total / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    err = proc.stderr.read().decode()
    if proc.wait() != 0:
        sys.exit(f"bench-stream: {target['name']}: mariadb failed: {err.strip()}")
    return total, time.monotonic() - started


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--proxy", type=Path, required=True)
    p.add_argument("--ds0-port", type=int, required=True)
    p.add_argument("--gib", type=float, default=1.0, help="size of the fast results")
    p.add_argument("--slow-mib", type=int, default=64, help="size of the 1 MiB/s results")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    port = free_port()
    config = subprocess.run([str(args.repo / "scripts/demo-config.sh")], capture_output=True,
                            text=True, check=True).stdout.strip()
    log = open(args.out / "stream-proxy.log", "w")
    proxy = subprocess.Popen([str(args.proxy), "--config", config, "--listen",
                              f"127.0.0.1:{port}", "--admin-listen", "127.0.0.1:0"],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    direct = {"name": "direct", "port": args.ds0_port, "user": "root", "db": "order_shards"}
    routed = {"name": "routekey", "port": port, "user": "app", "password": "app", "db": "orders"}
    small_rows = int(args.gib * 1024 * MIB / 1008)  # ~1000 bytes of text per row
    big = 16 * MIB - 1024
    cases = [
        ("small rows, fast client", f"SELECT seq, REPEAT('x', 1000) FROM seq_1_to_{small_rows}", None),
        ("16 MiB rows, fast client", f"SELECT REPEAT('x', {big}) FROM seq_1_to_{int(args.gib * 64)}", None),
        ("small rows, 1 MiB/s client",
         f"SELECT seq, REPEAT('x', 1000) FROM seq_1_to_{args.slow_mib * MIB // 1008}", MIB),
        ("16 MiB rows, 1 MiB/s client",
         f"SELECT REPEAT('x', {big}) FROM seq_1_to_{max(1, args.slow_mib // 16)}", MIB),
    ]
    results = []
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        # Warm up: pools, caches and the first statements, so the baseline is the steady state.
        for _ in range(3):
            read_result(routed, "SELECT seq FROM seq_1_to_100000")
        baseline = vm_hwm_kib(proxy.pid)
        for name, sql, rate in cases:
            row = {"case": name}
            targets = [routed] if rate else [direct, routed]
            for t in targets:
                size, seconds = read_result(t, sql, rate)
                row[f"{t['name']}_mib"] = size / MIB
                row[f"{t['name']}_mib_per_s"] = size / MIB / seconds
            row["hwm_growth_mib"] = (vm_hwm_kib(proxy.pid) - baseline) / 1024
            results.append(row)
            print(json.dumps(row), flush=True)
    finally:
        proxy.terminate()
        proxy.wait()
    lines = ["| case | size | direct MiB/s | routekey MiB/s | ratio | proxy VmHWM growth since warm-up |",
             "|---|---|---|---|---|---|"]
    for r in results:
        d = r.get("direct_mib_per_s")
        rate = r["routekey_mib_per_s"]
        direct_text = f"{d:.0f}" if d else "-"
        ratio = f"{rate / d:.2f}" if d else "-"
        lines.append(f"| {r['case']} | {r['routekey_mib']:.0f} MiB | {direct_text} | {rate:.0f} | "
                     f"{ratio} | {r['hwm_growth_mib']:.1f} MiB |")
    text = "\n".join(lines)
    (args.out / "stream.md").write_text(text + "\n")
    (args.out / "stream.json").write_text(json.dumps(results, indent=1))
    print(text)


if __name__ == "__main__":
    main()
