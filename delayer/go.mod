module dnsstudy/delayer

go 1.22

require (
	github.com/florianl/go-nfqueue/v2 v2.0.2
	github.com/mdlayher/netlink v1.7.2
)

require (
	github.com/google/go-cmp v0.6.0 // indirect
	github.com/josharian/native v1.1.0 // indirect
	github.com/mdlayher/socket v0.4.1 // indirect
	golang.org/x/net v0.25.0 // indirect
	golang.org/x/sync v0.7.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
