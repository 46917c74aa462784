module github.com/gocomm/comm

go 1.26
