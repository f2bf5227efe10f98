#!/usr/bin/env bash
# Prints the path of a proxy configuration for the sandbox:
#
#   scripts/demo-config.sh            config/demo.toml, or, when the sandbox runs on other ports
#                                     (ROUTEKEY_DS0_PORT / ROUTEKEY_DS1_PORT) or in another folder,
#                                     a copy of it with those ports (and that folder's TLS files),
#                                     written into the sandbox folder as demo.toml
#   scripts/demo-config.sh --cluster  the demo's (scripts/demo.sh): config/demo.toml with each
#                                     datasource a cluster, `members` = `scripts/sandbox.sh members
#                                     dsX` (the sandbox must be up, with replicas for replica
#                                     reads), the account routekey_rw (read_only stops it), and a
#                                     user app_ro (password app) with reads = "replica", and, when
#                                     the sandbox has its spare (up --spare), a datasource ds2 on
#                                     it with no shards (where `shards move` can move them);
#                                     written into the sandbox folder as demo-cluster.toml
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cluster=0
case "${1:-}" in
    "") ;;
    --cluster) cluster=1 ;;
    *) echo "usage: $0 [--cluster]" >&2; exit 2 ;;
esac
ds0="${ROUTEKEY_DS0_PORT:-33061}"
ds1="${ROUTEKEY_DS1_PORT:-33062}"
if (( ! cluster )) && [[ "$ds0" == 33061 && "$ds1" == 33062 && -z "${ROUTEKEY_SANDBOX_DIR:-}" ]]; then
    printf '%s\n' "$repo/config/demo.toml"
    exit 0
fi
dir="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
case "$dir" in /*) ;; *) dir="$repo/$dir" ;; esac
mkdir -p "$dir"
if (( ! cluster )); then
    sed -e "s/127\.0\.0\.1:33061/127.0.0.1:$ds0/" -e "s/127\.0\.0\.1:33062/127.0.0.1:$ds1/" \
        -e "s#\"\.sandbox/tls/#\"$dir/tls/#" \
        "$repo/config/demo.toml" > "$dir/demo.toml"
    printf '%s\n' "$dir/demo.toml"
    exit 0
fi

# --cluster: members as the sandbox has them now (primary first; the proxy finds the primary
# by read_only whatever the order, and follows it when `sandbox.sh promote` moves it).
m0="$(ROUTEKEY_SANDBOX_DIR="$dir" "$repo/scripts/sandbox.sh" members ds0)"
m1="$(ROUTEKEY_SANDBOX_DIR="$dir" "$repo/scripts/sandbox.sh" members ds1)"
spare=""
[[ -f "$dir/spare-port" ]] && spare="$(cat "$dir/spare-port")"
python3 - "$repo/config/demo.toml" "$dir/demo-cluster.toml" "$dir" "$m0" "$m1" "$spare" <<'PY'
import re, sys

src, dst, sandbox, m0, m1, spare = sys.argv[1:]
members = {"ds0": m0.split(","), "ds1": m1.split(",")}
app_ro = '''[[users]]
name = "app_ro"
password = "app"
# SELECTs outside a read-write transaction go to a healthy replica (the primary when none
# is), after the session's own writes (consistency = "session", the default).
reads = "replica"

'''
out, section, done = [], None, set()
for line in open(src, encoding="utf-8").read().splitlines(keepends=True):
    m = re.match(r"\s*\[+\s*([^\]]+?)\s*\]+\s*$", line)
    if m:
        section = m.group(1)
        if section == "id" and spare:
            out.append('[datasources.ds2]                  # the spare: no shards until `shards move`\n'
                       'address = "127.0.0.1:%s"\nuser = "routekey_rw"\npassword = "routekey-secret"\n'
                       'database = "orders"\n\n' % spare)
        if section == "datasources.ds0" and "app_ro" not in done:
            out.append(app_ro)
            done.add("app_ro")
    ds = section[len("datasources."):] if section and section.startswith("datasources.") else None
    if ds in members:
        key = line.split("=", 1)[0].strip()
        if key == "address":
            line = "members = [%s]\n" % ", ".join('"%s"' % a for a in members[ds])
            done.add(ds + ".members")
        elif key == "user":
            line = 'user = "routekey_rw"                # no SUPER / READ_ONLY ADMIN: read_only stops it\n'
            done.add(ds + ".user")
        elif key == "password":
            line = 'password = "routekey-secret"\n'
            done.add(ds + ".password")
    line = line.replace('".sandbox/tls/', '"%s/tls/' % sandbox)
    out.append(line)
want = {"app_ro"} | {f"{ds}.{k}" for ds in members for k in ("members", "user", "password")}
if want - done:
    sys.exit(f"demo-config: config/demo.toml changed shape; not rewritten: {sorted(want - done)}")
with open(dst, "w", encoding="utf-8") as f:
    f.write("# Written by scripts/demo-config.sh --cluster from config/demo.toml: the demo's\n"
            "# datasources as replication clusters of the sandbox (scripts/sandbox.sh up --replicas 1).\n")
    f.writelines(out)
PY
printf '%s\n' "$dir/demo-cluster.toml"
