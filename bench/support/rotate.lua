-- Sends the paths listed in the file named by WRK_PATHS in turn, with the headers given by -H.
local paths = {}
for line in io.lines(os.getenv("WRK_PATHS")) do
  if line ~= "" then paths[#paths + 1] = line end
end
local next_path = 0

request = function()
  next_path = next_path % #paths + 1
  return wrk.format(nil, paths[next_path])
end
