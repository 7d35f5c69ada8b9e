package main

import "errors"

// errFound stops a filepath.WalkDir once what it looked for is found.
var errFound = errors.New("found")
