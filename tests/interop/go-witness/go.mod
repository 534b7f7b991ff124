module blackbox.test/interop/go-witness

go 1.25.0

require (
	github.com/transparency-dev/formats v0.1.2-0.20260710124811-af9e607161b6
	golang.org/x/mod v0.37.0
)

require (
	filippo.io/mldsa v0.0.0-20260215214346-43d0283efc3e // indirect
	golang.org/x/crypto v0.53.0 // indirect
)
