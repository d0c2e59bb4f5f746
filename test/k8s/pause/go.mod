module tempora.dev/pause

go 1.22
