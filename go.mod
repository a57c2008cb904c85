module github.com/fencesim/fencesim

go 1.26

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/jonboulle/clockwork v0.5.0
	pgregory.net/rapid v1.3.0
)
