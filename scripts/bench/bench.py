#!/usr/bin/env python3
"""Point selects by order id: direct MariaDB, routekey-proxy and (when present) ProxySQL,
interleaved in one run, repeated; prints medians with min-max and ratios to direct, writes the
raw figures as JSON and, when matplotlib is there, a plot of the ratio against clients.

Run through scripts/bench.sh, which builds the release proxy, installs sysbench and matplotlib
and passes the sandbox's settings. Every target reads the same ids (--ids: the new-format or the
legacy orders the sandbox seeded on ds0), unless a --variant names its own. Direct and ProxySQL
name the physical table of each id (order_shards.t_order_N); routekey-proxy names the logical
t_order and routes.

Figures per run: queries/s, latency p50 and p99 (from sysbench's histogram, ms), and the CPU
the proxy process used (user and system, from /proc/PID/stat) per query in microseconds.
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LUA = HERE / "point_select.lua"
TICKS = os.sysconf("SC_CLK_TCK")
# sysbench --histogram: "       0.062 |*****                                    26"
HISTOGRAM_LINE = re.compile(r"^\s*(\d+\.\d+)\s+\|[* ]*?\s(\d+)\s*$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mariadb(port, sql, user="root", password=""):
    cmd = ["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{port}", f"-u{user}", "-N", "--batch"]
    if password:
        cmd.append(f"-p{password}")
    return subprocess.run(cmd, input=sql, capture_output=True, text=True, check=True).stdout


def ids_file(sandbox, ds0_port, out, kind="new"):
    """Writes '<order_id> <physical table>' for every seeded id of `kind` stored on ds0: `new`
    (route-key ids, routed by decoding) or `legacy` (ids from before the route key, routed by
    the cache and the index table)."""
    seed = json.loads((sandbox / "seed-summary.json").read_text())
    field = "new_format_ids" if kind == "new" else "legacy_ids"
    ids = [str(i) for ch in seed["channels"].values() for i in ch[field]]
    tables = mariadb(
        ds0_port,
        "SELECT table_name FROM information_schema.tables WHERE table_schema='order_shards'"
        " AND table_name REGEXP '^t_order_[0-9]+$'",
    ).split()
    union = " UNION ALL ".join(
        f"SELECT order_id, '{t}' FROM order_shards.{t} WHERE order_id IN ({','.join(ids)})"
        for t in tables
    )
    rows = mariadb(ds0_port, union)
    out.write_text(rows)
    count = len(rows.splitlines())
    if count < 50:
        sys.exit(f"bench: only {count} seeded ids on ds0; is the sandbox seeded?")
    return count


def wait_port(port, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"bench: nothing answers on port {port}")


def cpu_ticks(pid):
    """(user, system) clock ticks the process has used so far."""
    if pid is None:
        return (0, 0)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def percentile(histogram, q):
    """The latency (ms) below which a share q of the histogram's events lie."""
    total = sum(c for _, c in histogram)
    seen = 0
    for value, count in histogram:
        seen += count
        if seen >= q * total:
            return value
    return histogram[-1][0] if histogram else float("nan")


def sysbench(target, mode, clients, seconds, ids):
    cmd = [
        "sysbench", str(LUA), f"--ids-file={target.get('ids', ids)}", f"--ps={'on' if mode == 'prepared' else 'off'}",
        "--db-driver=mysql", "--mysql-ssl=off", f"--mysql-user={target['user']}", f"--mysql-db={target['db']}",
        f"--threads={clients}", f"--time={seconds}", "--histogram=on", "--report-interval=0",
    ]
    if target.get("password"):
        cmd.append(f"--mysql-password={target['password']}")
    if target.get("socket"):
        cmd.append(f"--mysql-socket={target['socket']}")
    else:
        cmd += ["--mysql-host=127.0.0.1", f"--mysql-port={target['port']}"]
    if target.get("logical"):
        cmd.append(f"--logical-table={target['logical']}")
    before = cpu_ticks(target.get("pid"))
    out = subprocess.run(cmd + ["run"], capture_output=True, text=True)
    after = cpu_ticks(target.get("pid"))
    text = out.stdout + out.stderr
    if out.returncode != 0 or "FATAL" in text:
        sys.exit(f"bench: sysbench against {target['name']} failed:\n{text}")
    queries = errors = None
    histogram = []
    for line in text.splitlines():
        parts = line.split()
        if line.strip().startswith("queries:"):
            queries = int(parts[1])
            qps = float(parts[2].lstrip("("))
        elif line.strip().startswith("ignored errors:"):
            errors = int(parts[2])
        elif bucket := HISTOGRAM_LINE.match(line):
            histogram.append((float(bucket[1]), int(bucket[2])))
    if errors:
        sys.exit(f"bench: {errors} errors against {target['name']}:\n{text}")
    user = (after[0] - before[0]) / TICKS
    system = (after[1] - before[1]) / TICKS
    return {
        "target": target["name"], "mode": mode, "clients": clients, "qps": qps,
        "queries": queries, "p50_ms": percentile(histogram, 0.50),
        "p99_ms": percentile(histogram, 0.99),
        "cpu_user_us": user * 1e6 / queries if target.get("pid") else None,
        "cpu_system_us": system * 1e6 / queries if target.get("pid") else None,
    }


def start_routekey(args, run_dir, name="routekey", binary=None, extra_env=None):
    """Starts a release proxy on a free port (and a socket with --socket); `name`, `binary` and
    `extra_env` give a variant (--variant) its own target in the same run."""
    port = free_port()
    config = subprocess.run(
        [str(args.repo / "scripts/demo-config.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    log = open(run_dir / f"{name}.log", "w")
    sock = run_dir / f"{name}.sock"
    # --pool-size for every routekey-proxy target (a variant's own setting wins).
    pools = {f"ROUTEKEY_DATASOURCES__{ds}__POOL_SIZE": str(args.pool_size)
             for ds in ("DS0", "DS1") if args.pool_size}
    env = dict(os.environ, **pools, **(extra_env or {}))
    if args.socket:
        env["ROUTEKEY_SERVER__SOCKET"] = str(sock)
    cmd = [str(binary or args.proxy), "--config", config, "--listen", f"127.0.0.1:{port}",
           "--admin-listen", "127.0.0.1:0"]
    if args.proxy_cpus:
        cmd = ["taskset", "-c", args.proxy_cpus] + cmd
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env)
    wait_port(port)
    common = {"user": "app", "password": "app", "db": "orders", "logical": "t_order",
              "pid": proc.pid}
    targets = [dict(common, name=name, port=port)]
    if args.socket:
        targets.append(dict(common, name=f"{name}-unix", socket=str(sock)))
    return proc, targets


def parse_variant(text):
    """NAME=PATH[,KEY=VALUE...]: another routekey-proxy binary (or the same one with other
    environment settings, e.g. ROUTEKEY_CACHE__CAPACITY=0) measured as a target of its own;
    IDS=new|legacy gives it other order ids than the run's."""
    name, rest = text.split("=", 1)
    path, *pairs = rest.split(",")
    env = dict(pair.split("=", 1) for pair in pairs)
    return name, Path(path), env.pop("IDS", None), env


def start_proxysql(args, run_dir):
    script = args.peers / "proxysql.sh"
    if not script.exists():
        return None, []
    port, admin = free_port(), free_port()
    sock = run_dir / "proxysql.sock"
    env = dict(os.environ, BACKEND_PORT=str(args.ds0_port), PROXYSQL_PORT=str(port),
               PROXYSQL_ADMIN_PORT=str(admin), RUN_DIR=str(run_dir / "proxysql"),
               PROXYSQL_SOCKET=str(sock))
    subprocess.run([str(script), "start"], env=env, check=True, capture_output=True)
    pid = int((run_dir / "proxysql" / "proxysql.pid").read_text())
    if args.proxy_cpus:
        subprocess.run(["taskset", "-a", "-p", "-c", args.proxy_cpus, str(pid)], check=True,
                       capture_output=True)
    common = {"user": "bench", "password": "bench", "db": "order_shards", "pid": pid}
    targets = [dict(common, name="proxysql", port=port)]
    if args.socket:
        targets.append(dict(common, name="proxysql-unix", socket=str(sock)))
    return (lambda: subprocess.run([str(script), "stop"], env=env, capture_output=True)), targets


def summarise(results, modes, clients_list, names):
    def cell(values):
        return statistics.median(values), min(values), max(values)

    lines = []
    by = {}
    for r in results:
        by.setdefault((r["target"], r["mode"], r["clients"]), []).append(r)
    lines.append("| target | mode | clients | queries/s median (min-max) | ratio to direct "
                 "median (min-max) | p50 ms | p99 ms | CPU user µs/q | CPU sys µs/q |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    table = {}
    for mode in modes:
        for clients in clients_list:
            direct = by.get(("direct", mode, clients), [])
            for name in names:
                runs = by.get((name, mode, clients), [])
                if not runs:
                    continue
                qps = cell([r["qps"] for r in runs])
                # Ratio per repetition: against the direct run of the same repetition.
                ratios = [r["qps"] / d["qps"] for r, d in zip(runs, direct)]
                ratio = cell(ratios) if ratios else (float("nan"),) * 3
                p50 = statistics.median(r["p50_ms"] for r in runs)
                p99 = statistics.median(r["p99_ms"] for r in runs)
                cpu = [r["cpu_user_us"] for r in runs if r["cpu_user_us"] is not None]
                sys_ = [r["cpu_system_us"] for r in runs if r["cpu_system_us"] is not None]
                cpu_u = f"{statistics.median(cpu):.1f}" if cpu else "-"
                cpu_s = f"{statistics.median(sys_):.1f}" if sys_ else "-"
                table[(name, mode, clients)] = ratio
                lines.append(
                    f"| {name} | {mode} | {clients} | {qps[0]:.0f} ({qps[1]:.0f}-{qps[2]:.0f}) | "
                    f"{ratio[0]:.2f} ({ratio[1]:.2f}-{ratio[2]:.2f}) | {p50:.3f} | {p99:.3f} | "
                    f"{cpu_u} | {cpu_s} |")
    return "\n".join(lines), table


def plot(table, modes, clients_list, names, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench: matplotlib missing; no plot", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for name in names:
            if name == "direct":
                continue
            points = [(c, table[(name, mode, c)]) for c in clients_list if (name, mode, c) in table]
            if not points:
                continue
            xs = [c for c, _ in points]
            med = [r[0] for _, r in points]
            low = [r[0] - r[1] for _, r in points]
            high = [r[2] - r[0] for _, r in points]
            ax.errorbar(xs, med, yerr=[low, high], marker="o", capsize=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(clients_list, [str(c) for c in clients_list])
        ax.set_xlabel("clients")
        ax.set_ylabel("throughput / direct MariaDB (same run)")
        ax.set_title(f"point select by order id, {mode}")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"bench: plot written to {path}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--proxy", type=Path, required=True)
    p.add_argument("--sandbox", type=Path, required=True)
    p.add_argument("--ds0-port", type=int, required=True)
    p.add_argument("--peers", type=Path, required=True)
    p.add_argument("--clients", default="1,4,16,64")
    p.add_argument("--modes", default="text,prepared")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--socket", action="store_true", help="also measure over Unix sockets")
    p.add_argument("--proxy-cpus", help="pin both proxies to these CPUs (taskset list, e.g. 0)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=PATH[,KEY=VALUE...]: another proxy binary or environment, "
                        "measured beside the others (experiments)")
    p.add_argument("--no-peer", action="store_true", help="leave ProxySQL out")
    p.add_argument("--pool-size", type=int,
                   help="routekey-proxy's pool_size for each datasource (default: the demo "
                        "configuration's 32; ProxySQL may open up to 1,000)")
    p.add_argument("--ids", choices=["new", "legacy"], default="new",
                   help="which seeded order ids the point selects read")
    args = p.parse_args()
    clients_list = [int(c) for c in args.clients.split(",")]
    modes = args.modes.split(",")
    run_dir = args.out
    run_dir.mkdir(parents=True, exist_ok=True)
    ids = run_dir / "ids.txt"
    count = ids_file(args.sandbox, args.ds0_port, ids, args.ids)

    proxy, targets = start_routekey(args, run_dir)
    procs = [proxy]
    for variant in args.variant:
        name, binary, kind, extra_env = parse_variant(variant)
        proc, more = start_routekey(args, run_dir, name, binary, extra_env)
        procs.append(proc)
        if kind:
            own = run_dir / f"ids-{kind}.txt"
            ids_file(args.sandbox, args.ds0_port, own, kind)
            more = [dict(t, ids=own) for t in more]
        targets += more
    stop_peer, peer_targets = (None, []) if args.no_peer else start_proxysql(args, run_dir)
    direct = {"name": "direct", "port": args.ds0_port, "user": "root", "db": "order_shards"}
    targets = [direct] + targets + peer_targets
    names = [t["name"] for t in targets]
    results = []
    try:
        for t in targets:
            for mode in modes:
                sysbench(t, mode, 16, args.warmup, ids)
        for rep in range(args.reps):
            for clients in clients_list:
                for mode in modes:
                    # Interleaved, the starting target rotating with the repetition.
                    order = targets[rep % len(targets):] + targets[:rep % len(targets)]
                    for t in order:
                        r = sysbench(t, mode, clients, args.seconds, ids)
                        r["rep"] = rep
                        results.append(r)
                        print(f"rep {rep} {mode:8} {clients:3} clients {t['name']:14} "
                              f"{r['qps']:9.0f} q/s  p50 {r['p50_ms']:.3f} ms", flush=True)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
        if stop_peer:
            stop_peer()
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    text, table = summarise(results, modes, clients_list, names)
    header = (f"{args.reps} interleaved repetitions of {args.seconds} s, {count} {args.ids}-format "
              f"order ids on ds0, "
              f"{os.cpu_count()} CPUs, proxies on CPUs {args.proxy_cpus or 'all'}, "
              f"routekey pool_size {args.pool_size or 'as configured'}, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    (run_dir / "summary.md").write_text(header + "\n\n" + text + "\n")
    print(header)
    print(text)
    plot(table, modes, clients_list, names, run_dir / "ratio.png")


if __name__ == "__main__":
    main()
