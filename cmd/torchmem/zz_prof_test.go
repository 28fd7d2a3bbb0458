package main

import "testing"

func TestZZProf(t *testing.T) {
	for i := 0; i < 5; i++ {
		runCLI(nil, "report", "/tmp/wt24-dev256.pickle", "-o", "/tmp/wt24-x.html")
	}
}
