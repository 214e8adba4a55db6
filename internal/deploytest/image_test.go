package deploytest_test

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stage is one FROM ... AS name section of the Dockerfile.
type stage struct {
	from  string
	lines []string
}

func parseDockerfile(t *testing.T) map[string]*stage {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fromRE := regexp.MustCompile(`^FROM (\S+) AS (\S+)$`)
	stages := map[string]*stage{}
	var cur *stage
	sc := bufio.NewScanner(f)
	var cont string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, cont = cont+line, ""
		if m := fromRE.FindStringSubmatch(line); m != nil {
			cur = &stage{from: m[1]}
			stages[m[2]] = cur
			continue
		}
		if cur == nil {
			t.Fatalf("Dockerfile: %q before any named FROM", line)
		}
		cur.lines = append(cur.lines, line)
	}
	return stages
}

func (s *stage) has(prefix string) string {
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestImageBuild checks the Dockerfile's shape (there is no Docker engine
// here) and runs its build step, scripts/build-binary.sh, outside Docker:
// the binary both images copy must be static, since the kube image has no
// libc, and must start.
func TestImageBuild(t *testing.T) {
	st := parseDockerfile(t)
	build, kube, local, encoder := st["build"], st["kube"], st["local"], st["encoder"]
	if build == nil || kube == nil || local == nil || encoder == nil {
		t.Fatalf("Dockerfile stages %v; want build, kube, local and encoder", st)
	}
	if build.has("ARG VERSION= COMMIT=") == "" {
		t.Error("the build stage takes no VERSION and COMMIT build args for `corral-vdi-portal version`")
	}
	if build.has("RUN bash scripts/build-binary.sh /out/corral-vdi-portal") == "" {
		t.Error("the build stage does not run scripts/build-binary.sh: CI would test other build steps than the image's")
	}
	for name, s := range map[string]*stage{"kube": kube, "local": local, "encoder": encoder} {
		if s.has("COPY --from=build /out/corral-vdi-portal ") == "" {
			t.Errorf("stage %s does not copy the build stage's binary", name)
		}
		user := s.has("USER ")
		if user == "" || strings.HasPrefix(user, "USER 0") || strings.HasPrefix(user, "USER root") || !regexp.MustCompile(`^USER [1-9][0-9]*:[1-9][0-9]*$`).MatchString(user) {
			t.Errorf("stage %s: %q; want a numeric non-root USER uid:gid (runAsNonRoot checks numbers)", name, user)
		}
		if s.has(`ENTRYPOINT ["/usr/local/bin/corral-vdi-portal"]`) == "" {
			t.Errorf("stage %s has no ENTRYPOINT of the binary", name)
		}
	}
	if !strings.HasPrefix(kube.from, "gcr.io/distroless/static-debian13:nonroot@") {
		t.Errorf("kube stage FROM %s; want distroless static-debian13, non-root", kube.from)
	}
	for name, s := range st {
		if !regexp.MustCompile(`^[^@ ]+@sha256:[0-9a-f]{64}$`).MatchString(s.from) {
			t.Errorf("stage %s FROM %s; want the base pinned by digest (tag@sha256:…)", name, s.from)
		}
	}
	if l := kube.has("RUN "); l != "" {
		t.Errorf("kube stage runs %q; want nothing but the binary", l)
	}
	// The kube Pod's encoder sidecar: GStreamer's pipeline of the hubs.
	for _, pkg := range []string{"gstreamer1.0-tools", "gstreamer1.0-plugins-base", "gstreamer1.0-plugins-good", "gstreamer1.0-plugins-ugly"} {
		if !strings.Contains(encoder.has("RUN apt-get update"), pkg) {
			t.Errorf("encoder stage does not install %s", pkg)
		}
	}
	install := local.has("RUN apt-get update")
	for _, pkg := range []string{"tigervnc-standalone-server", "tigervnc-tools", "openbox", "xterm", "x11-xserver-utils", "freerdp2-shadow-x11", "winpr-utils"} {
		if !strings.Contains(install, pkg) {
			t.Errorf("local stage does not install %s", pkg)
		}
	}

	if testing.Short() {
		t.Skip("building the static binary takes a minute")
	}
	out := filepath.Join(t.TempDir(), "corral-vdi-portal")
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "build-binary.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-binary.sh: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has an ELF interpreter: it is dynamically linked and would not run on distroless/static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary needs %v; want none", libs)
	}
	if fi, err := os.Stat(out); err == nil {
		t.Logf("static binary: %.1f MiB", float64(fi.Size())/(1<<20))
	}
	help, _ := exec.Command(out, "serve", "-h").CombinedOutput()
	if !strings.Contains(string(help), "CORRAL_VDI_TOKEN_KEYS") {
		t.Fatalf("serve -h of the built binary:\n%s", help)
	}
}
