package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// containerShare is the part of a container's memory limit given to the Go
// heap when --memory-limit is not set: the rest is for what the runtime's
// limit does not see (thread stacks in the kernel, page tables) and for the
// time the collector needs to catch up.
const containerShare = 0.9

// memoryLimit is the soft limit serve gives the runtime, and where it comes
// from: --memory-limit when set; else none when GOMEMLIMIT is set (the
// runtime read it); else containerShare of the container's memory limit
// (cgroup v2 memory.max, or v1 memory.limit_in_bytes, under cgroupRoot);
// else none (0).
func memoryLimit(configured int, gomemlimit, cgroupRoot string) (int64, string, error) {
	switch {
	case configured > 0:
		return int64(configured), "--memory-limit", nil
	case gomemlimit != "":
		return 0, "GOMEMLIMIT", nil
	}
	limit, file, err := cgroupMemoryLimit(cgroupRoot)
	if err != nil || limit == 0 {
		return 0, "", err
	}
	return int64(float64(limit) * containerShare), fmt.Sprintf("%.0f%% of the container's limit of %d bytes (%s)", containerShare*100, limit, file), nil
}

// unlimited is where cgroup v1 reports "no limit" (a page-rounded MaxInt64).
const unlimited = 1 << 60

// cgroupMemoryLimit reads the memory limit of the process's cgroup; 0 when
// there is none or no cgroup file to read.
func cgroupMemoryLimit(root string) (int64, string, error) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		file := filepath.Join(root, name)
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, file, fmt.Errorf("reading the container's memory limit: %w", err)
		}
		text := strings.TrimSpace(string(data))
		if text == "max" {
			return 0, file, nil
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n <= 0 {
			return 0, file, fmt.Errorf("reading the container's memory limit: %s holds %q, not a byte count", file, text)
		}
		if n >= unlimited {
			return 0, file, nil
		}
		return n, file, nil
	}
	return 0, "", nil
}
