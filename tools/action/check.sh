#!/usr/bin/env bash
# The script of torchmem's GitHub Action (action.yml at the repository's
# root): it finds torchmem (the one on the PATH, or a release binary it
# fetches and checks against the release's SHA256SUMS), runs torchmem check
# with the action's inputs, annotations and the job summary on (--github),
# and exits with torchmem check's status: 0 every check passed, 1 a check
# failed, 2 bad input (and here: no binary, a wrong checksum, a bad input).
#
# The inputs arrive as TORCHMEM_* environment variables (see action.yml);
# the runner's GITHUB_* and RUNNER_* variables say where to write. Nothing
# an input holds is ever run as code.
set -euo pipefail

# fail writes an error annotation (GitHub's escaping of a command's data)
# and exits 2.
fail() {
	local msg="$*"
	msg=${msg//'%'/'%25'}
	msg=${msg//$'\r'/'%0D'}
	msg=${msg//$'\n'/'%0A'}
	echo "::error title=torchmem::$msg"
	exit 2
}

# is_yes NAME VALUE succeeds for a yes, fails for a no, and stops the script
# for anything else. (Bash 3.2, macOS's own, runs this script: no ${x,,},
# no mapfile.)
is_yes() {
	case "$(printf '%s' "$2" | tr '[:upper:]' '[:lower:]')" in
	true | yes | 1) return 0 ;;
	false | no | 0 | '') return 1 ;;
	*) fail "input $1: \"$2\" is not true or false" ;;
	esac
}

# fetch URL FILE downloads with curl (or wget), over https or from a local
# file:// mirror only.
fetch() {
	if command -v curl >/dev/null; then
		curl -fsSL --retry 3 --proto '=https,file' --proto-redir '=https' -o "$2" "$1"
	elif command -v wget >/dev/null; then
		wget -q --https-only -O "$2" "$1"
	else
		fail "neither curl nor wget is installed to fetch $1"
	fi
}

# sha256 prints a file's SHA-256 in hex.
sha256() {
	if command -v sha256sum >/dev/null; then
		sha256sum "$1" | cut -d' ' -f1
	else
		shasum -a 256 "$1" | cut -d' ' -f1
	fi
}

allow_oom=false update_baseline=false
if is_yes allow-oom "${TORCHMEM_ALLOW_OOM:-}"; then allow_oom=true; fi
if is_yes update-baseline "${TORCHMEM_UPDATE_BASELINE:-}"; then update_baseline=true; fi

# The binary: the one on the PATH unless a version is asked for, else the
# release of the version (default: the ref the action was used at).
version=${TORCHMEM_VERSION:-}
if [[ -z $version ]] && bin=$(command -v torchmem); then
	echo "torchmem: using $bin ($("$bin" --version))"
else
	if [[ -z $version ]]; then
		version=${TORCHMEM_ACTION_REF:-}
		if [[ ! $version =~ ^v?[0-9] ]]; then
			fail "no torchmem on the PATH, and this action was used at \"$version\", which is not a release: use it at a release tag (uses: OWNER/torchmem@v1.2.3) or set with: version: v1.2.3"
		fi
	fi
	if [[ ! $version =~ ^[A-Za-z0-9._+-]+$ ]]; then
		fail "input version: \"$version\" is not a release tag"
	fi
	case "${RUNNER_OS:-$(uname -s)}" in
	Linux) os=linux ;;
	macOS | Darwin) os=darwin ;;
	*) fail "no torchmem release binary for ${RUNNER_OS:-$(uname -s)}: put torchmem on the PATH first (go install ./cmd/torchmem from a checkout of torchmem)" ;;
	esac
	case "${RUNNER_ARCH:-$(uname -m)}" in
	X64 | x86_64 | amd64) arch=amd64 ;;
	ARM64 | aarch64 | arm64) arch=arm64 ;;
	*) fail "no torchmem release binary for the ${RUNNER_ARCH:-$(uname -m)} processor" ;;
	esac
	base=${TORCHMEM_RELEASE_URL:-}
	if [[ -z $base ]]; then
		repo=${TORCHMEM_ACTION_REPOSITORY:-}
		if [[ -z $repo && ${GITHUB_ACTION_PATH:-} =~ /_actions/([^/]+)/([^/]+)/ ]]; then
			# The runner checks an action out at _actions/OWNER/REPO/REF
			# (github.action_repository is not always set for composite actions).
			repo=${BASH_REMATCH[1]}/${BASH_REMATCH[2]}
		fi
		[[ -n $repo ]] || fail "the action's repository is unknown: set with: release-url:"
		base=https://github.com/$repo/releases/download/$version
	fi
	base=${base%/}
	name=torchmem-$version-$os-$arch
	dir=${RUNNER_TEMP:-${TMPDIR:-/tmp}}/torchmem-$version-$os-$arch
	mkdir -p "$dir"
	bin=$dir/torchmem
	echo "torchmem: fetching $base/$name"
	fetch "$base/SHA256SUMS" "$dir/SHA256SUMS" || fail "could not fetch $base/SHA256SUMS"
	want=$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1; exit }' "$dir/SHA256SUMS")
	[[ $want =~ ^[0-9a-f]{64}$ ]] || fail "$base/SHA256SUMS has no checksum for $name"
	fetch "$base/$name" "$dir/$name" || fail "could not fetch $base/$name"
	got=$(sha256 "$dir/$name")
	if [[ $got != "$want" ]]; then
		rm -f "$dir/$name"
		fail "$name: its SHA-256 is $got, but SHA256SUMS says $want: refused, not run"
	fi
	chmod 755 "$dir/$name"
	mv -f "$dir/$name" "$bin"
	line=$("$bin" --version) || fail "$bin --version failed"
	[[ $line == "torchmem $version "* ]] || fail "$name says it is \"$line\", not torchmem $version"
	echo "torchmem: $line, checksum $got as SHA256SUMS says"
	# Later steps of the job find it too (torchmem diff, report).
	if [[ -n ${GITHUB_PATH:-} ]]; then echo "$dir" >>"$GITHUB_PATH"; fi
fi
if [[ -n ${GITHUB_OUTPUT:-} ]]; then echo "torchmem=$bin" >>"$GITHUB_OUTPUT"; fi

# torchmem check's arguments. Globs in files are expanded here; budgets
# and args are split at spaces (never expanded).
args=(check)
while IFS= read -r pattern; do
	pattern=${pattern#"${pattern%%[![:space:]]*}"}
	pattern=${pattern%"${pattern##*[![:space:]]}"}
	[[ -n $pattern ]] || continue
	if [[ $pattern == *[*?[]* ]]; then
		n=${#args[@]}
		while IFS= read -r match; do args+=("$match"); done < <(compgen -G "$pattern" | LC_ALL=C sort)
		[[ ${#args[@]} -gt $n ]] || fail "input files: nothing matches $pattern"
	else
		args+=("$pattern")
	fi
done <<<"${TORCHMEM_FILES:-}"
[[ ${#args[@]} -gt 1 ]] || fail "input files: no file to check"
[[ -z ${TORCHMEM_BASELINE:-} ]] || args+=(--baseline "$TORCHMEM_BASELINE")
[[ -z ${TORCHMEM_TOLERANCE:-} ]] || args+=(--tolerance "$TORCHMEM_TOLERANCE")
[[ -z ${TORCHMEM_FLOOR:-} ]] || args+=(--floor "$TORCHMEM_FLOOR")
[[ -z ${TORCHMEM_CONFIG:-} ]] || args+=(--config "$TORCHMEM_CONFIG")
[[ -z ${TORCHMEM_DEVICE:-} ]] || args+=(--device "$TORCHMEM_DEVICE")
[[ -z ${TORCHMEM_JUNIT:-} ]] || args+=(--junit "$TORCHMEM_JUNIT")
[[ $allow_oom == false ]] || args+=(--allow-oom)
[[ $update_baseline == false ]] || args+=(--update-baseline)
set -f
for b in ${TORCHMEM_BUDGET:-}; do args+=(--budget "$b"); done
for a in ${TORCHMEM_ARGS:-}; do args+=("$a"); done
set +f
args+=(--github)

echo "torchmem:$(printf ' %q' "${args[@]}")"
status=0
"$bin" "${args[@]}" || status=$?
if [[ -n ${GITHUB_OUTPUT:-} ]]; then echo "exit-code=$status" >>"$GITHUB_OUTPUT"; fi
exit "$status"
