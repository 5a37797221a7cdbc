package sherpa

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// The espeak-ng data of the process. sherpa-onnx initializes espeak-ng
// once per process (a std::call_once) with the data_dir of the first
// espeak voice it creates, and every later voice phonemizes with that
// data whatever its own data_dir. espeak-ng does not hold that data in
// memory: the phonemizer sets its voice before every phonemization, and
// setting a voice reads the voice file and the language's whole
// dictionary (en_dict) from the folder again. Were that folder the first
// checkpoint's own, deleting or replacing that checkpoint (a conformance
// check's folder removed as it ends, a model re-uploaded) would change
// every later synthesis of every espeak voice in the process: without
// its dictionary espeak-ng still answers, with other phonemes, and the
// audio is other bytes, often a fraction of the length (the engine
// contract's same bytes for the same request, sherpa.matched-outputs).
// So the library is never given a checkpoint's folder: the first
// espeak-ng data the process meets is copied once into a folder of the
// process's own (espeakCopyPrefix, the process ID in its name), and every
// espeak voice is created with that copy's path. The copy lives as long
// as the process: the process holds a shared flock on its lock file
// (released by the kernel however the process ends, whatever PID
// namespace it ran in), and a later process making its own copy removes
// every copy whose lock it can take exclusively.
var espeakData struct {
	mu   sync.Mutex
	src  string   // the data_dir whose copy the library reads (named in messages)
	dir  string   // the copy: what every voice's data_dir is set to
	lock *os.File // held open (locked) for the process's life
	has  sync.Map
	// inPlace: the child load (child.go) reads the checkpoint's folder
	// itself; it loads once and exits, and a copy would outlive it.
	inPlace bool
}

// espeakCopyPrefix begins the name of a process's copy of its espeak-ng
// data in the temporary directory: sluice-sherpa-espeak-<pid>-<random>.
const espeakCopyPrefix = "sluice-sherpa-espeak-"

// espeakDir returns the data_dir to give the library for a voice whose
// checkpoint has dir: the process's copy of the first such folder, made
// now if this is the first. A failed copy fails the load (and the next
// load tries again): the library is not given a folder that can change
// under it.
func espeakDir(dir string) (string, error) {
	espeakData.mu.Lock()
	defer espeakData.mu.Unlock()
	if espeakData.dir != "" {
		return espeakData.dir, nil
	}
	if espeakData.inPlace {
		espeakData.src, espeakData.dir = dir, dir
		return dir, nil
	}
	removeStaleEspeakCopies()
	tmp, err := os.MkdirTemp("", espeakCopyPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("sherpa: a copy of the espeak-ng data: %w", err)
	}
	lock, err := os.Create(filepath.Join(tmp, espeakLockName))
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("sherpa: locking the copy of the espeak-ng data: %w", err)
	}
	dst := filepath.Join(tmp, "espeak-ng-data")
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		lock.Close()
		os.RemoveAll(tmp)
		return "", fmt.Errorf("sherpa: copying the espeak-ng data %s: %w", dir, err)
	}
	espeakData.src, espeakData.dir, espeakData.lock = dir, dst, lock
	return dst, nil
}

// espeakLockName is the lock file in a process's copy.
const espeakLockName = "owner.lock"

// removeStaleEspeakCopies removes the copies whose process has ended: the
// lock file takes an exclusive lock. A copy without a lock file is being
// made (or was left between its folder and its lock) and is kept.
func removeStaleEspeakCopies() {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), espeakCopyPrefix+"*"))
	for _, p := range old {
		f, err := os.OpenFile(filepath.Join(p, espeakLockName), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			os.RemoveAll(p)
		}
		f.Close()
		if err != nil && !errors.Is(err, syscall.EWOULDBLOCK) {
			slog.Warn("sherpa: an espeak-ng data copy's lock", "dir", p, "err", err)
		}
	}
}

// espeakActiveHas reports whether the process's espeak-ng data has voice,
// and names the checkpoint folder that data came from.
func espeakActiveHas(voice string) (bool, string) {
	espeakData.mu.Lock()
	dir, src := espeakData.dir, espeakData.src
	espeakData.mu.Unlock()
	if v, ok := espeakData.has.Load(voice); ok {
		return v.(bool), src
	}
	has := dir == "" || espeakHasVoice(dir, voice)
	if dir != "" {
		espeakData.has.Store(voice, has)
	}
	return has, src
}
