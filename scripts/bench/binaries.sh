# Sourced by scripts/bench-core.sh and scripts/bench-replicas.sh (from the repository root):
# build_binaries WORK BASELINE puts release builds of commit BASELINE (in a git worktree
# under WORK/baseline-src, sharing target/ for dependencies) and of the working tree at
# WORK/routekey-proxy-baseline and WORK/routekey-proxy-current.
build_binaries() {
    local work="$1" baseline="$2" tree commit
    tree="$work/baseline-src"
    if [[ ! -d "$tree" ]]; then
        git worktree add --detach "$tree" "$baseline" >&2
    else
        git -C "$tree" checkout -q --detach "$baseline"
    fi
    # Both trees build the same package into one target/: cargo keeps one fingerprint for
    # it, and a build whose sources are older than the other tree's output would be taken
    # as fresh (the other tree's binary copied under this name). Touching the crate root
    # forces each.
    commit="$(git -C "$tree" rev-parse HEAD)"
    if [[ ! -x "$work/routekey-proxy-baseline" || "$(cat "$work/baseline.commit" 2>/dev/null)" != "$commit" ]]; then
        touch "$tree/src/lib.rs"
        CARGO_TARGET_DIR="$PWD/target" cargo build --release --locked -q --manifest-path "$tree/Cargo.toml"
        cp target/release/routekey-proxy "$work/routekey-proxy-baseline"
        echo "$commit" >"$work/baseline.commit"
    fi
    touch src/lib.rs
    cargo build --release --locked -q
    cp target/release/routekey-proxy "$work/routekey-proxy-current"
}
