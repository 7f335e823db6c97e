-- kernstat for a neovim statusline: values from the kernstat daemon, asked over one
-- Unix socket kept open (libuv, never blocking the editor) every `interval_ms`.
--
--   require("kernstat").setup({ keys = { "git.branch", "load.one" } })
--   vim.o.statusline = "%f %= %{v:lua.require'kernstat'.status()}"
--
-- Each request asks for the value as one line of text ("text":true in
-- docs/protocol.md); per-directory keys (git.*, python.* ...) carry neovim's current
-- directory. The connection is made again when the daemon restarts.
local M = { values = {} }
local uv = vim.loop

local opts = {
  keys = { "git.branch", "load.one" },
  interval_ms = 2000,
  socket = nil,
  separator = " ",
}
local path_scoped = { git = true, python = true, terraform = true, asdf = true, mise = true, direnv = true }
local pipe, timer, buf, waiting = nil, nil, "", 0

local function default_socket()
  local rt = os.getenv("XDG_RUNTIME_DIR")
  if rt and rt ~= "" and uv.fs_stat(rt) then
    return rt .. "/kernstat/sock"
  end
  local uid = uv.getuid()
  if uid == 0 then
    return "/run/kernstat/sock"
  end
  return "/tmp/kernstat-" .. uid .. "/sock"
end

local function close()
  if pipe then
    pipe:close()
  end
  pipe, buf, waiting = nil, "", 0
end

local function on_read(err, data)
  if err or not data then
    return vim.schedule(close)
  end
  buf = buf .. data
  while true do
    local nl = buf:find("\n", 1, true)
    if not nl then
      break
    end
    local line = buf:sub(1, nl - 1)
    buf = buf:sub(nl + 1)
    local key = opts.keys[#opts.keys - waiting + 1]
    waiting = waiting - 1
    if key then
      M.values[key] = line
    end
  end
  if waiting == 0 then
    vim.schedule(function()
      vim.cmd("redrawstatus")
    end)
  end
end

local function ask()
  if waiting > 0 then
    return -- the last round is not answered yet
  end
  if not pipe then
    pipe = uv.new_pipe(false)
    local p = pipe
    p:connect(opts.socket or default_socket(), function(err)
      if err then
        return vim.schedule(close)
      end
      p:read_start(on_read)
    end)
  end
  local dir = uv.fs_realpath(uv.cwd()) or uv.cwd()
  local lines = {}
  for _, key in ipairs(opts.keys) do
    local req = { op = "get", key = key, text = true }
    if path_scoped[key:match("^[^.]+")] then
      req.path = dir
    end
    lines[#lines + 1] = vim.fn.json_encode(req)
  end
  waiting = #opts.keys
  pipe:write(table.concat(lines, "\n") .. "\n", function(err)
    if err then
      vim.schedule(close)
    end
  end)
end

--- Starts asking. opts: keys (list), interval_ms, socket (path), separator.
function M.setup(user)
  opts = vim.tbl_extend("force", opts, user or {})
  if timer then
    timer:stop()
  end
  timer = uv.new_timer()
  timer:start(0, opts.interval_ms, vim.schedule_wrap(ask))
end

--- The values of the keys, in order, without the empty ones.
function M.status()
  local out = {}
  for _, key in ipairs(opts.keys) do
    local v = M.values[key]
    if v and v ~= "" then
      out[#out + 1] = v
    end
  end
  return table.concat(out, opts.separator)
end

--- Stops asking and closes the connection.
function M.stop()
  if timer then
    timer:stop()
    timer:close()
    timer = nil
  end
  close()
end

return M
