package pocketsphinx

import (
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// lib is the loaded libpocketsphinx (with libsphinxbase).
type lib struct {
	args        func() unsafe.Pointer
	parse       func(inout unsafe.Pointer, defn unsafe.Pointer, argc int32, argv unsafe.Pointer, strict int32) unsafe.Pointer
	freeConfig  func(cfg unsafe.Pointer) int32
	initPS      func(cfg unsafe.Pointer) unsafe.Pointer
	freePS      func(ps unsafe.Pointer) int32
	startStream func(ps unsafe.Pointer) int32
	startUtt    func(ps unsafe.Pointer) int32
	processRaw  func(ps unsafe.Pointer, data unsafe.Pointer, n uintptr, noSearch, fullUtt int32) int32
	endUtt      func(ps unsafe.Pointer) int32
	getHyp      func(ps unsafe.Pointer, score unsafe.Pointer) unsafe.Pointer
	getFeat     func(ps unsafe.Pointer) unsafe.Pointer                      // ps_get_feat
	getSearch   func(ps unsafe.Pointer) unsafe.Pointer                      // ps_get_search: the active search's name
	getLM       func(ps unsafe.Pointer, name unsafe.Pointer) unsafe.Pointer // ps_get_lm
	cmnGet      func(cmn, vec unsafe.Pointer) int32                         // cmn_live_get
	cmnSet      func(cmn, vec unsafe.Pointer)                               // cmn_live_set
	// The word segmentation of the last utterance. ps_seg_iter takes only
	// the decoder in 5prealpha (older releases had a score out-parameter:
	// a valid pointer is passed as a second argument, which the C calling
	// convention lets a one-argument function ignore).
	segIter   func(ps unsafe.Pointer, score unsafe.Pointer) unsafe.Pointer
	segNext   func(seg unsafe.Pointer) unsafe.Pointer
	segWord   func(seg unsafe.Pointer) unsafe.Pointer
	segFrames func(seg unsafe.Pointer, sf, ef unsafe.Pointer)
	segFree   func(seg unsafe.Pointer)

	initMu sync.Mutex // decoder construction reads shared defaults; keep it one at a time
}

var (
	libOnce   sync.Once
	theLib    *lib
	theLibErr error
)

func load() (*lib, error) {
	libOnce.Do(func() {
		const hint = "install the Debian packages libpocketsphinx3 and pocketsphinx-en-us"
		base, err := native.Open(hint, "libsphinxbase.so.3")
		if err != nil {
			theLibErr = err
			return
		}
		ps, err := native.Open(hint, "libpocketsphinx.so.3")
		if err != nil {
			theLibErr = err
			return
		}
		l := &lib{}
		var setLogFP func(fp unsafe.Pointer)
		if err := native.Bind(base,
			&l.parse, "cmd_ln_parse_r",
			&l.freeConfig, "cmd_ln_free_r",
			&setLogFP, "err_set_logfp",
			&l.cmnGet, "cmn_live_get",
			&l.cmnSet, "cmn_live_set",
		); err != nil {
			theLibErr = err
			return
		}
		if err := native.Bind(ps,
			&l.args, "ps_args",
			&l.initPS, "ps_init",
			&l.freePS, "ps_free",
			&l.startStream, "ps_start_stream",
			&l.startUtt, "ps_start_utt",
			&l.processRaw, "ps_process_raw",
			&l.endUtt, "ps_end_utt",
			&l.getHyp, "ps_get_hyp",
			&l.getFeat, "ps_get_feat",
			&l.getSearch, "ps_get_search",
			&l.getLM, "ps_get_lm",
			&l.segIter, "ps_seg_iter",
			&l.segNext, "ps_seg_next",
			&l.segWord, "ps_seg_word",
			&l.segFrames, "ps_seg_frames",
			&l.segFree, "ps_seg_free",
		); err != nil {
			theLibErr = err
			return
		}
		// Silence sphinxbase's logging (it would write every utterance's
		// search statistics to stderr). Errors are reported by return
		// codes and by Validate's file checks instead.
		setLogFP(nil)
		theLib = l
	})
	return theLib, theLibErr
}

// newDecoder builds a decoder from command-line style arguments.
func (l *lib) newDecoder(argv []string) unsafe.Pointer {
	l.initMu.Lock()
	defer l.initMu.Unlock()
	cargv := native.CStrings(argv)
	defer native.FreeCStrings(cargv, len(argv))
	cfg := l.parse(nil, l.args(), int32(len(argv)), cargv, 1)
	if cfg == nil {
		return nil
	}
	ps := l.initPS(cfg)
	l.freeConfig(cfg) // the decoder keeps its own reference
	return ps
}
