-- sysbench script: transfers between an order on ds0 and an order on ds1, one per event,
-- through routekey-proxy (text protocol, the logical t_order). Thread N (0-based) uses the
-- N+1-th id of each list, so no two clients touch the same rows (no lock waits between them).
--
--   atomic:   BEGIN; UPDATE <ds0 order>; UPDATE <ds1 order>; COMMIT
--             (one transaction across both datasources: the proxy's atomic commit)
--   separate: BEGIN; UPDATE <ds0 order>; COMMIT; BEGIN; UPDATE <ds1 order>; COMMIT
--             (two transactions on one datasource each)
--
-- The direction alternates from one event to the next (ds0 -1 / ds1 +1, then ds0 +1 / ds1 -1),
-- and a thread that ends after an odd number of events runs one more, uncounted, so every
-- amount is back where it started once the run ends.
--
--   sysbench scripts/bench/transfer.lua --mode=atomic|separate --ds0-ids=A1,A2,...
--            --ds1-ids=B1,B2,... --db-driver=mysql --mysql-... --threads=N --time=S run
sysbench.cmdline.options = {
    mode = {"atomic (one transaction over both orders) or separate (one per order)", "atomic"},
    ds0_ids = {"Comma-separated order ids on ds0, one per thread", ""},
    ds1_ids = {"Comma-separated order ids on ds1, one per thread", ""},
    table = {"The table every UPDATE names", "t_order"},
}

local function split(text)
    local out = {}
    for id in text:gmatch("%d+") do out[#out + 1] = id end
    return out
end

local a, b, n

function thread_init()
    local mode = sysbench.opt.mode
    assert(mode == "atomic" or mode == "separate", "--mode is atomic or separate")
    local ds0, ds1 = split(sysbench.opt.ds0_ids), split(sysbench.opt.ds1_ids)
    local i = sysbench.tid + 1
    assert(ds0[i] and ds1[i], "fewer ids than threads: each thread needs a ds0 and a ds1 order")
    -- Ids stay text: they are unsigned 64-bit, beyond a Lua number's exact range.
    a, b, n = ds0[i], ds1[i], 0
    drv = sysbench.sql.driver()
    con = drv:connect()
end

local function update(id, sign)
    con:query("UPDATE " .. sysbench.opt.table .. " SET amount = amount " .. sign
        .. " 1 WHERE order_id = " .. id)
end

local function transfer()
    local out, into = "-", "+"
    if n % 2 == 1 then out, into = "+", "-" end
    if sysbench.opt.mode == "atomic" then
        con:query("BEGIN")
        update(a, out)
        update(b, into)
        con:query("COMMIT")
    else
        con:query("BEGIN")
        update(a, out)
        con:query("COMMIT")
        con:query("BEGIN")
        update(b, into)
        con:query("COMMIT")
    end
    n = n + 1
end

function event()
    transfer()
end

function thread_done()
    if n % 2 == 1 then transfer() end
    con:disconnect()
end
