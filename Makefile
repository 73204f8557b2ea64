# One set of commands, run the same way locally and in CI. `make help` lists them.
SHELL := /bin/bash
PNPM_VERSION := 10.34.9
PNPM := $(shell command -v pnpm 2>/dev/null)
ifeq ($(PNPM),)
PNPM := npx --yes pnpm@$(PNPM_VERSION)
endif

.DEFAULT_GOAL := help
.PHONY: help install pnpm generate start build test typecheck lint format format-check dev-split bench db-migrate

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

pnpm: ## Install the pinned pnpm when it is missing (a fresh machine needs only Node 20+ and make)
	@command -v pnpm >/dev/null 2>&1 || npm install -g pnpm@$(PNPM_VERSION)

install: pnpm ## Install dependencies from the lockfile and generate the database client
	pnpm install --frozen-lockfile
	pnpm db:generate

generate: ## Regenerate the Prisma client
	pnpm db:generate

start: install ## Start the all-in-one gateway (embedded PostgreSQL and bus unless DATABASE_URL/NATS_URL are set)
	pnpm start

build: install ## Compile every service to JavaScript in dist/ (what the production image runs), and the agent-side clients
	node scripts/build-services.mjs
	node scripts/build-clients.mjs

test: install ## Check formatting, typecheck, lint and run every test suite (what CI runs)
	pnpm format:check
	pnpm typecheck
	pnpm lint
	pnpm test

typecheck: ## Type-check the whole workspace
	pnpm typecheck

lint: ## Lint the whole workspace
	pnpm lint

format: ## Format every file with prettier
	pnpm format

format-check: ## Check formatting without writing
	pnpm format:check

db-migrate: ## Apply migrations to DATABASE_URL
	pnpm db:migrate

dev-split: install ## Run the four services as separate processes against local PostgreSQL and NATS
	./scripts/dev-split.sh

bench: install ## Run the benchmarks (ratios against baselines measured in the same run)
	pnpm bench
