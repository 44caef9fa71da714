-- Headless Neovim as a second, independent LSP client (Debian's Neovim 0.7 API).
-- Attaches `kernelbrain serve` to one file, waits for diagnostics and code lenses, and writes
-- what it received as JSON. Inputs come from environment variables set by the test.
local file = os.getenv("KB_FILE")
local out = os.getenv("KB_OUT")
local cmd = vim.fn.json_decode(os.getenv("KB_CMD"))
local root = os.getenv("KB_ROOT")

vim.cmd("edit " .. vim.fn.fnameescape(file))
local bufnr = vim.api.nvim_get_current_buf()
local result = { diagnostics = {}, lenses = {}, errors = {} }

local client_id = vim.lsp.start_client({
  name = "kernelbrain",
  cmd = cmd,
  root_dir = root,
  -- a user who trusts this folder says so in the server's settings (Neovim has no trust model)
  init_options = { kernelbrain = { trustWorkspace = true } },
  on_error = function(code, err) table.insert(result.errors, tostring(code) .. ": " .. tostring(err)) end,
})
vim.lsp.buf_attach_client(bufnr, client_id)

local got_diags = vim.wait(20000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
for _, d in ipairs(vim.diagnostic.get(bufnr)) do
  table.insert(result.diagnostics, { code = d.code, line = d.lnum, message = d.message, source = d.source })
end

local client = vim.lsp.get_client_by_id(client_id)
local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr) }
local response = client and client.request_sync("textDocument/codeLens", params, 10000, bufnr)
if response and response.result then
  for _, lens in ipairs(response.result) do
    table.insert(result.lenses, { line = lens.range.start.line, title = lens.command and lens.command.title,
                                  command = lens.command and lens.command.command })
  end
elseif response and response.err then
  table.insert(result.errors, vim.inspect(response.err))
end
result.got_diagnostics = got_diags

local f = io.open(out, "w")
f:write(vim.fn.json_encode(result))
f:close()
vim.lsp.stop_client(client_id)
vim.wait(2000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 50)
vim.cmd("qa!")
