package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// procStat reads /proc/<pid>/stat: the command name, and the fields after
// it (state first, so the kernel's field n is fields[n-3]). The name may
// hold spaces and parentheses; it ends at the last ')'.
func procStat(pid int) (comm string, fields []string, err error) {
	buf, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, err
	}
	i, j := bytes.LastIndexByte(buf, ')'), bytes.IndexByte(buf, '(')
	if i < 0 || j < 0 || j > i {
		return "", nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return string(buf[j+1 : i]), strings.Fields(string(buf[i+1:])), nil
}
