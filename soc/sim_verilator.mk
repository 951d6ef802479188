# LiteX's litex/build/sim/core/Makefile (BSD-2-Clause), changed for soc/sim.py:
# --trace only with TRACE=1 (a traced model is slower even while it dumps
# nothing), OPT_FAST passed to Verilator's own make (its default -Os
# overrides OPT_LEVEL for the model's fast path), the glue from
# soc/sim_veril.cpp, which builds either way, and gcc's profile-guided
# optimisation (PGO=generate, then PGO=use: soc/sim.py --pgo).  Debug info
# only with DEBUG=1 and the model's run-once code (Verilator's "Slow" files:
# constructors, initial blocks) at OPT_SLOW: a faster build, the same model.
# No auto-vectorisation: Debian's gcc 12.2 at -O2 turns a Verilated count of
# matches (Amaranth's sum(state == X for ...)) into pcmpeqb + psadbw and
# keeps the compare's 0xFF per match, so the count reads as its negation.
include variables.mak
OPT_SLOW ?= -O0
PGO_GEN := $(if $(filter generate,$(PGO)),-fprofile-generate,)
PGO_USE := $(if $(filter use,$(PGO)),-fprofile-use -fprofile-correction -Wno-missing-profile,)
UNAME_S := $(shell uname -s)
UNAME_M := $(shell uname -m)

ifeq ($(UNAME_S),Darwin)
	ifeq ($(UNAME_M),x86_64)
		CFLAGS += -I/usr/local/include
		LDFLAGS += -L/usr/local/lib
	else
		CFLAGS += -I/opt/homebrew/include
		LDFLAGS += -L/opt/homebrew/lib
	endif
	LDFLAGS += -lpthread -ljson-c -lz -lm -lstdc++ -ldl -levent $(if $(VIDEO), -lSDL2)
else
	CC ?= gcc
	CFLAGS += $(if $(DEBUG),-ggdb,)
	LDFLAGS += -lpthread -Wl,--no-as-needed -ljson-c -lz -lm -lstdc++ -Wl,--no-as-needed -ldl -levent $(if $(VIDEO), -lSDL2)
endif

CFLAGS += -Wall -$(OPT_LEVEL) -fno-tree-vectorize $(if $(COVERAGE), -DVM_COVERAGE) $(if $(TRACE_FST), -DTRACE_FST)

CC_SRCS ?= "--cc sim.v"

SRC_DIR ?= .
INC_DIR ?= .
MOD_DIR = $(SRC_DIR)/modules
export OBJ_DIR = $(abspath obj_dir)

SRCS_SIM_ABSPATH = $(wildcard $(SRC_DIR)/*.c)
SRCS_SIM = $(notdir $(SRCS_SIM_ABSPATH))
SRCS_SIM_CPP = sim_init.cpp $(VERIL_CPP)
OBJS_SIM = $(SRCS_SIM:.c=.o)

all: modules sim

mkdir:
	mkdir -p $(OBJ_DIR)

$(OBJS_SIM): %.o: $(SRC_DIR)/%.c | mkdir
	$(CC) -c $(CFLAGS) -o $(OBJ_DIR)/$@ $<

.PHONY: sim
sim: $(OBJS_SIM) | mkdir
	verilator -Wno-fatal -O3 $(CC_SRCS) --top-module sim --exe \
		-DPRINTF_COND=0 \
		$(SRCS_SIM_CPP) $(OBJS_SIM) \
		--top-module sim \
		$(if $(THREADS), --threads $(THREADS),) \
		-CFLAGS "$(CFLAGS) -I$(SRC_DIR)" \
		-LDFLAGS "$(LDFLAGS) $(PGO_GEN)" \
		$(if $(TRACE), --trace,) \
		$(if $(TRACE_FST), --trace-fst,) \
		$(if $(COVERAGE), --coverage,) \
		--unroll-count 256 \
		--output-split 5000 \
		--output-split-cfuncs 500 \
		--output-split-ctrace 500 \
		$(INC_DIR) \
		-Wno-BLKANDNBLK \
		-Wno-WIDTH \
		-Wno-COMBDLY \
		-Wno-CASEINCOMPLETE \
		--relative-includes
	make -j$(JOBS) -C $(OBJ_DIR) -f Vsim.mk Vsim OPT_SLOW="$(OPT_SLOW)" $(if $(OPT_FAST)$(PGO),OPT_FAST="$(OPT_FAST) $(PGO_GEN) $(PGO_USE)",) \
		$(if $(PGO),OPT_GLOBAL="$(OPT_FAST) $(PGO_GEN) $(PGO_USE)",)

.PHONY: modules
modules:
	mkdir -p modules
	$(MAKE) -C modules -f $(MOD_DIR)/Makefile

.PHONY: clean
clean:
	rm -rf $(OBJ_DIR)
