-- A lua program for the runtimes corpus: string patterns, coroutines, io.popen, files, os.exit.
local counts = {}
for i = 1, 20000 do local w = ("w" .. (i * 7919 % 97)); counts[w] = (counts[w] or 0) + 1 end
local keys = {} for k in pairs(counts) do keys[#keys + 1] = k end
table.sort(keys, function(a, b) return counts[a] > counts[b] or (counts[a] == counts[b] and a < b) end)
print(keys[1], counts[keys[1]], #keys)
local gen = coroutine.wrap(function() for i = 1, 5 do coroutine.yield(i * i) end end)
local s = 0 for _ = 1, 5 do s = s + gen() end print("coroutines", s)
local p = io.popen("seq 1 1000 | sort -rn | head -2") print((p:read("a"):gsub("\n", " "))) print(p:close())
local f = assert(io.open("x.txt", "w")) for i = 1, 500 do f:write(i, "\n") end f:close()
local n = 0 for _ in io.lines("x.txt") do n = n + 1 end print("lines", n)
print(("%q"):format(("abc"):rep(3):gsub("b", "B")))
os.exit(5)
