package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is the sampler's output, read by the test while the sampler writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually fails the test unless cond holds within 5 s. A fixed sleep is not enough for a
// starved process (these tests failed once beside a VM booting; stopped 150 ms of every 170 ms,
// the sleep-based versions failed every time).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not within 5s: " + what)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSampleChildrenReadsEveryContainerInNameOrder(t *testing.T) {
	root := t.TempDir()
	pod := filepath.Join(root, "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod1_2.slice")
	write(t, filepath.Join(pod, "cri-containerd-bbb.scope", "memory.current"), "100\n")
	write(t, filepath.Join(pod, "cri-containerd-bbb.scope", "memory.swap.current"), "7\n")
	write(t, filepath.Join(pod, "cri-containerd-bbb.scope", "memory.max"), "max\n")
	write(t, filepath.Join(pod, "cri-containerd-bbb.scope", "memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n")
	write(t, filepath.Join(pod, "cri-containerd-aaa.scope", "memory.current"), "5\n")
	write(t, filepath.Join(pod, "memory.current"), "105\n") // the pod's own files are not a container

	if got := findDirs(root, []string{"pod1-2"})["pod1-2"]; got != pod { // a UID as the API spells it
		t.Fatalf("findDirs = %q, want %q", got, pod)
	}
	if got := findDirs(root, []string{"pod9_9"})["pod9_9"]; got != "" {
		t.Fatalf("findDirs of an absent pod = %q", got)
	}
	rows, err := sampleChildren(pod, time.UnixMilli(1234))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sample 1234 cri-containerd-aaa.scope 5 - - - -",
		"sample 1234 cri-containerd-bbb.scope 100 7 max - 1",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

func TestSampleLoopStopsWhenThePodCgroupIsGone(t *testing.T) {
	root := t.TempDir()
	pod := filepath.Join(root, "podx")
	write(t, filepath.Join(pod, "c1", "memory.current"), "1")
	var out syncBuffer
	lines := make(chan string, 1)
	lines <- "podx"
	done := make(chan error)
	go func() { done <- (sampling{root: root, interval: 10 * time.Millisecond, out: &out}).run(lines, nil) }()
	eventually(t, "a sample of podx", func() bool { return strings.Contains(out.String(), "sample ") })
	if err := os.RemoveAll(pod); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, done, "the pod's cgroup went away")
	text := out.String()
	if !strings.Contains(text, "sample ") || !strings.HasSuffix(text, "stopped reason=gone\n") {
		t.Fatalf("output %q", text)
	}
}

func TestSampleLoopStopsWhenAskedOrStdinCloses(t *testing.T) {
	for _, last := range []string{"stop", ""} {
		var out bytes.Buffer
		lines := make(chan string, 2)
		lines <- "pod-never"
		if last == "stop" {
			lines <- "stop"
		} else {
			close(lines)
		}
		if err := (sampling{root: t.TempDir(), interval: time.Hour, out: &out}).run(lines, nil); err != nil {
			t.Fatal(err)
		}
		if out.String() != "stopped reason=asked\n" {
			t.Fatalf("after %q: output %q", last, out.String())
		}
	}
}

func TestSampleLoopFollowsSeveralPodsUntilAllAreGone(t *testing.T) {
	root := t.TempDir()
	for _, pod := range []string{"poda", "podb"} {
		write(t, filepath.Join(root, pod, "c-"+pod, "memory.current"), "1")
	}
	lines := make(chan string, 2)
	lines <- "poda"
	lines <- "podb"
	var out syncBuffer
	done := make(chan error)
	go func() { done <- (sampling{root: root, interval: 10 * time.Millisecond, out: &out}).run(lines, nil) }()
	eventually(t, "a sample of both pods", func() bool {
		return strings.Contains(out.String(), " c-poda ") && strings.Contains(out.String(), " c-podb ")
	})
	_ = os.RemoveAll(filepath.Join(root, "poda"))
	time.Sleep(50 * time.Millisecond) // podb alone for a while: the loop must not stop yet
	select {
	case err := <-done:
		t.Fatalf("stopped (%v) while podb's cgroup was still there", err)
	default:
	}
	_ = os.RemoveAll(filepath.Join(root, "podb"))
	waitStopped(t, done, "both pods' cgroups went away")
	text := out.String()
	for _, want := range []string{" c-poda ", " c-podb ", "stopped reason=gone\n"} {
		if !strings.Contains(text, want) {
			t.Fatalf("no %q in %q", want, text)
		}
	}
}

func TestWatchDirSendsEachNewFileOnce(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "poda"), "")
	lines := make(chan string, 10)
	go watchDir(dir, 10*time.Millisecond, lines)
	if got := <-lines; got != "poda" {
		t.Fatalf("first name %q", got)
	}
	write(t, filepath.Join(dir, "stop"), "")
	select {
	case got := <-lines:
		if got != "stop" {
			t.Fatalf("second name %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new file was not seen")
	}
	time.Sleep(50 * time.Millisecond)
	if len(lines) != 0 {
		t.Fatalf("a file was sent twice: %q", <-lines)
	}
}

// waitStopped fails the test unless sampling.run returns without error within 5 s of `after`.
func waitStopped(t *testing.T, done <-chan error, after string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sampling did not stop after " + after)
	}
}

func TestKeptSamplingWritesAFilePerPodAtItsOwnIntervalAndOutlivesThem(t *testing.T) {
	root, outDir := t.TempDir(), t.TempDir()
	write(t, filepath.Join(root, "poda", "c-a", "memory.current"), "1")
	write(t, filepath.Join(root, "podb", "c-b", "memory.current"), "2")
	lines := make(chan string, 3)
	lines <- "poda"
	lines <- "podb@200ms"
	done := make(chan error)
	start := time.Now()
	go func() {
		done <- (sampling{root: root, interval: 10 * time.Millisecond, outDir: outDir, keep: true}).run(lines, nil)
	}()
	samples := func(pod string) int {
		text, _ := os.ReadFile(filepath.Join(outDir, pod))
		return strings.Count(string(text), "sample ")
	}
	eventually(t, "10 samples of poda and 2 of podb", func() bool { return samples("poda") >= 10 && samples("podb") >= 2 })
	_ = os.RemoveAll(filepath.Join(root, "poda"))
	_ = os.RemoveAll(filepath.Join(root, "podb"))
	sampled := time.Since(start) // podb had at most one sample at once and one per 200 ms of this
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("stopped (%v) although --keep: every pod was gone", err)
	default:
	}
	lines <- "stop"
	waitStopped(t, done, "asked to stop")
	a, _ := os.ReadFile(filepath.Join(outDir, "poda"))
	b, _ := os.ReadFile(filepath.Join(outDir, "podb"))
	if !strings.Contains(string(a), " c-a 1 ") || strings.Contains(string(a), "c-b") {
		t.Fatalf("poda's file: %q", a)
	}
	nb, na := strings.Count(string(b), "sample "), strings.Count(string(a), "sample ")
	if most := int(sampled/(200*time.Millisecond)) + 1; nb > most || na < 10 {
		t.Fatalf("%d samples of podb (every 200ms: at most %d in %v), %d of poda (every 10ms)", nb, most, sampled, na)
	}
}

func TestAFollowNameWithABadIntervalIsAnError(t *testing.T) {
	if _, err := parseFollow("podx@soon", time.Second); err == nil {
		t.Fatal("podx@soon accepted")
	}
	if f, err := parseFollow("podx@500ms", time.Second); err != nil || f.part != "podx" || f.every != 500*time.Millisecond {
		t.Fatalf("podx@500ms: %+v %v", f, err)
	}
}

func TestAPodWhoseCgroupAppearsLaterIsFoundAndSampled(t *testing.T) {
	root := t.TempDir()
	lines := make(chan string, 2)
	lines <- "podlate"
	var out syncBuffer
	done := make(chan error)
	go func() { done <- (sampling{root: root, interval: 10 * time.Millisecond, out: &out}).run(lines, nil) }()
	time.Sleep(50 * time.Millisecond) // looked for at once, and not there: walked again within findEvery
	write(t, filepath.Join(root, "kubepods.slice", "podlate", "c1", "memory.current"), "7")
	eventually(t, "a sample of the late pod", func() bool { return strings.Contains(out.String(), " c1 7 ") })
	_ = os.RemoveAll(filepath.Join(root, "kubepods.slice", "podlate"))
	waitStopped(t, done, "the late pod's cgroup went away")
	if text := out.String(); !strings.Contains(text, " c1 7 ") || !strings.HasSuffix(text, "stopped reason=gone\n") {
		t.Fatalf("output %q", text)
	}
}

func TestTouchCreatesEveryFileInOneCall(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "poda@500ms"), filepath.Join(dir, "podb@500ms")
	if err := runTouch([]string{a, b}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := runTouch(nil); err == nil {
		t.Fatal("touch without files succeeded")
	}
}
