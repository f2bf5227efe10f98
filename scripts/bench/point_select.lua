-- sysbench script: point selects by order id, one per event, in the text protocol or as a
-- server-side prepared statement. Ids (and the table each is read from) come from a file of
-- "<order_id> <table>" lines; with --logical-table the table column is ignored and every
-- select names that table instead (the proxy's logical t_order).
--
--   sysbench scripts/bench/point_select.lua --ids-file=F [--logical-table=t_order]
--            [--ps=on] --db-driver=mysql --mysql-... --threads=N --time=S run
local ffi = require("ffi")

sysbench.cmdline.options = {
    ids_file = {"File of '<order_id> <table>' lines", ""},
    logical_table = {"Name every select's table this instead of the file's", ""},
    ps = {"Server-side prepared statements (on) or the text protocol (off)", false},
}

-- Order ids are unsigned 64-bit; a Lua number (a double) would round ids above 2^53.
local function to_u64(text)
    local v = ffi.new("uint64_t", 0)
    for i = 1, #text do
        v = v * 10ULL + (text:byte(i) - 48)
    end
    return v
end

local rows = {}

function thread_init()
    assert(sysbench.opt.ids_file ~= "", "--ids-file is required")
    for line in io.lines(sysbench.opt.ids_file) do
        local id, tbl = line:match("^(%d+)%s+(%S+)$")
        if id then
            if sysbench.opt.logical_table ~= "" then tbl = sysbench.opt.logical_table end
            rows[#rows + 1] = {text = id, value = to_u64(id), table = tbl}
        end
    end
    assert(#rows > 0, "no ids in " .. sysbench.opt.ids_file)
    drv = sysbench.sql.driver()
    con = drv:connect()
    if sysbench.opt.ps then
        statements = {}
        for _, r in ipairs(rows) do
            if not statements[r.table] then
                local stmt = con:prepare("SELECT * FROM " .. r.table .. " WHERE order_id = ?")
                local param = stmt:bind_create(sysbench.sql.type.BIGINT)
                stmt:bind_param(param)
                statements[r.table] = {stmt = stmt, param = param}
            end
        end
    end
end

function event()
    local r = rows[sysbench.rand.uniform(1, #rows)]
    if sysbench.opt.ps then
        local s = statements[r.table]
        s.param:set(r.value)
        s.stmt:execute()
    else
        con:query("SELECT * FROM " .. r.table .. " WHERE order_id = " .. r.text)
    end
end

function thread_done()
    if statements then
        for _, s in pairs(statements) do s.stmt:close() end
    end
    con:disconnect()
end
