// Command modproxy writes modules of a git work tree into a directory laid
// out as a Go module proxy (the GOPROXY protocol, served with
// GOPROXY=file://DIR), at one version, so that `go get` can be tried on
// them before they are tagged:
//
//	go run ./cmd/modproxy -o /tmp/proxy -version v0.1.0 .. ../fdbkv
//
// Each argument is a module's directory. Its zip holds the files git tracks
// there, with their contents in the work tree, minus those of nested modules
// and the other files the go command leaves out of module zips (the rules of
// golang.org/x/mod/zip, which also rejects what a proxy would reject: bad
// file names, files over the size limits). So the zip is what the go command
// would download once the module is tagged at that commit. As the go
// command does, a module in a subdirectory without a LICENSE of its own
// gets the repository's. With -require-license a module without any LICENSE
// is an error (pkg.go.dev shows no documentation for it). For each module
// it writes DIR/<escaped path>/@v/ list, VERSION.info, VERSION.mod and
// VERSION.zip.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	out := flag.String("o", "", "the proxy directory to write (created if missing)")
	version := flag.String("version", "v0.1.0", "the version to serve every module at")
	needLicense := flag.Bool("require-license", false, "fail for a module whose zip has no LICENSE")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: modproxy -o DIR [-version V] [-require-license] MODULEDIR...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		mv, n, err := write(*out, dir, *version, time.Now(), *needLicense)
		if err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", dir, err)
			os.Exit(1)
		}
		fmt.Printf("modproxy: %s@%s (%d files)\n", mv.Path, mv.Version, n)
	}
}

// write adds the module in dir to the proxy directory out at version and
// returns the module and how many files its zip holds.
func write(out, dir, version string, now time.Time, needLicense bool) (module.Version, int, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return module.Version{}, 0, err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return module.Version{}, 0, errors.New("go.mod has no module line")
	}
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return mv, 0, err
	}
	files, err := tracked(dir)
	if err != nil {
		return mv, 0, err
	}
	if !slices.ContainsFunc(files, func(f modzip.File) bool { return f.Path() == "LICENSE" }) {
		if lic, ok, err := rootLicense(dir); err != nil {
			return mv, 0, err
		} else if ok {
			files = append(files, lic)
		} else if needLicense {
			return mv, 0, errors.New("no LICENSE in the module or at the repository's root")
		}
	}
	escaped, err := module.EscapePath(mv.Path)
	if err != nil {
		return mv, 0, err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return mv, 0, err
	}

	var zbuf bytes.Buffer
	if err := modzip.Create(&zbuf, mv, files); err != nil {
		return mv, 0, err
	}
	// Count what went in: Create leaves out nested modules' files and
	// reports nothing about them.
	cf, err := modzip.CheckFiles(files)
	if err != nil {
		return mv, 0, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{mv.Version, now.UTC().Truncate(time.Second)})
	if err != nil {
		return mv, 0, err
	}
	for name, data := range map[string][]byte{
		"list":               []byte(mv.Version + "\n"),
		mv.Version + ".info": info,
		mv.Version + ".mod":  gomod,
		mv.Version + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return mv, 0, err
		}
	}
	return mv, len(cf.Valid), nil
}

// tracked lists the files git tracks under dir (nested modules included:
// modzip.Create leaves them out), read from the work tree.
func tracked(dir string) ([]modzip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var files []modzip.File
	for _, name := range strings.Split(string(outb), "\x00") {
		if name == "" {
			continue
		}
		st, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name)))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			return nil, err
		}
		files = append(files, file{dir: dir, name: name, info: st})
	}
	if len(files) == 0 {
		return nil, errors.New("git tracks no files here")
	}
	return files, nil
}

// rootLicense is the LICENSE at the root of the git work tree holding dir,
// when dir is a subdirectory and git tracks that file.
func rootLicense(dir string) (modzip.File, bool, error) {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--show-toplevel", "--show-prefix").Output()
	if err != nil {
		return nil, false, fmt.Errorf("git rev-parse: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) < 2 || lines[1] == "" {
		return nil, false, nil // dir is the root
	}
	top := lines[0]
	if err := exec.Command("git", "-C", top, "ls-files", "--error-unmatch", "LICENSE").Run(); err != nil {
		return nil, false, nil // not tracked
	}
	st, err := os.Lstat(filepath.Join(top, "LICENSE"))
	if err != nil {
		return nil, false, err
	}
	return file{dir: top, name: "LICENSE", info: st}, true, nil
}

// file is one work-tree file, as modzip.File.
type file struct {
	dir, name string
	info      os.FileInfo
}

func (f file) Path() string                { return f.name }
func (f file) Lstat() (os.FileInfo, error) { return f.info, nil }
func (f file) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.dir, filepath.FromSlash(f.name)))
}
