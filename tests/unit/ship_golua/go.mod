module raygitops.local/shipgolua

go 1.23

require github.com/yuin/gopher-lua v1.1.2
