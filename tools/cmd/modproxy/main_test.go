package main

import (
	"archive/zip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A module's zip holds the files git tracks, without nested modules or
// untracked files, plus the repository's LICENSE when the module is in a
// subdirectory, under the module@version/ prefix, next to list, .info and
// .mod, in the directory of the escaped path.
func TestWriteServesTrackedFilesOfOneModule(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	dir := filepath.Join(repo, "mod")
	put := func(name, content string) {
		p := filepath.Join(repo, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	gomod := "module example.com/Upper/m\n\ngo 1.24.0\n"
	put("mod/go.mod", gomod)
	put("mod/a.go", "package m\n")
	put("mod/inner/b.go", "package inner\n")
	put("mod/nested/go.mod", "module example.com/Upper/m/nested\n")
	put("mod/nested/c.go", "package nested\n")
	put("LICENSE", "the license\n")
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	git("init", "-q")
	git("add", ".")
	put("mod/untracked.go", "package m\n")

	out := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mv, n, err := write(out, dir, "v0.1.0", now, true)
	require.NoError(t, err)
	require.Equal(t, "example.com/Upper/m", mv.Path)
	require.Equal(t, 4, n)

	vdir := filepath.Join(out, "example.com", "!upper", "m", "@v")
	list, err := os.ReadFile(filepath.Join(vdir, "list"))
	require.NoError(t, err)
	require.Equal(t, "v0.1.0\n", string(list))
	mod, err := os.ReadFile(filepath.Join(vdir, "v0.1.0.mod"))
	require.NoError(t, err)
	require.Equal(t, gomod, string(mod))
	var info struct {
		Version string
		Time    time.Time
	}
	raw, err := os.ReadFile(filepath.Join(vdir, "v0.1.0.info"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &info))
	require.Equal(t, "v0.1.0", info.Version)
	require.True(t, info.Time.Equal(now))

	zr, err := zip.OpenReader(filepath.Join(vdir, "v0.1.0.zip"))
	require.NoError(t, err)
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	require.Equal(t, []string{
		"example.com/Upper/m@v0.1.0/LICENSE",
		"example.com/Upper/m@v0.1.0/a.go",
		"example.com/Upper/m@v0.1.0/go.mod",
		"example.com/Upper/m@v0.1.0/inner/b.go",
	}, names)
}

func TestWriteRejectsABadVersion(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n"), 0o644))
	_, _, err := write(t.TempDir(), dir, "1.0", time.Now(), false)
	require.ErrorContains(t, err, "1.0")
}

// With -require-license, a module with no LICENSE, in it or at the
// repository's root, is an error; without, it is served.
func TestWriteRequireLicense(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n"), 0o644))
	cmd := exec.Command("git", "init", "-q")
	cmd.Dir = dir
	require.NoError(t, cmd.Run())
	cmd = exec.Command("git", "add", "go.mod")
	cmd.Dir = dir
	require.NoError(t, cmd.Run())
	_, _, err := write(t.TempDir(), dir, "v0.1.0", time.Now(), true)
	require.ErrorContains(t, err, "no LICENSE")
	_, n, err := write(t.TempDir(), dir, "v0.1.0", time.Now(), false)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}
