-- The replay front's exact answers (harness/lab/replayfront.py): every answer's body, recorded content type,
-- headers and wait, read once by nginx's master at start (its workers inherit them), served by the one location
-- that serves every answer. One location and one file of bodies, not one of each per answer: the Lua module
-- cost nginx's start 0.3 ms per location (9 s on 30,000 answers), and this host's disk 0.3-0.8 ms per file.
local M = {}
local answers = {}
local bodies = ""
local SEP = "\31" -- the unit separator: no recorded value holds a control character (replayfront.py)

-- Read the bodies and the table: a line per answer, fields split by SEP: number, wait in ms, the body's offset
-- and length in the bodies, content type, then header name, value, name, value...
function M.load(table_path, bodies_path)
  local f = assert(io.open(bodies_path, "rb"))
  bodies = f:read("*a")
  f:close()
  for line in io.lines(table_path) do
    local field = {}
    for value in (line .. SEP):gmatch("([^" .. SEP .. "]*)" .. SEP) do
      field[#field + 1] = value
    end
    local names, values = {}, {}
    for i = 6, #field - 1, 2 do
      local name, value = field[i], field[i + 1]
      if values[name] == nil then
        names[#names + 1] = name
        values[name] = {}
      end
      table.insert(values[name], value)
    end
    answers[field[1]] = {
      wait = tonumber(field[2]) / 1000,
      first = tonumber(field[3]) + 1,
      length = tonumber(field[4]),
      type = field[5],
      names = names,
      values = values,
    }
  end
end

-- The content phase: the recorded server wait (non-blocking), then the body.
function M.serve()
  local a = answers[ngx.var.replay_object]
  if a == nil then
    return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR) -- the map and the table are written together: never
  end
  if a.wait > 0 then
    ngx.sleep(a.wait)
  end
  ngx.header["Content-Length"] = a.length
  ngx.print(bodies:sub(a.first, a.first + a.length - 1))
end

-- The header filter, after headers-more removed nginx's own: the recorded content type and headers (a name
-- recorded several times keeps every value, in order).
function M.headers()
  local a = answers[ngx.var.replay_object]
  if a == nil then
    return
  end
  if a.type ~= "" then
    ngx.header["Content-Type"] = a.type
  end
  for _, name in ipairs(a.names) do
    local v = a.values[name]
    ngx.header[name] = #v == 1 and v[1] or v
  end
end

return M
