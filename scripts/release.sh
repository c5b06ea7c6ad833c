#!/usr/bin/env bash
# Builds a release of the provider exactly as the registry publishes one, into --out DIR (default ./dist,
# which git ignores), signed with a maintainer's key (GNUPGHOME and HPC_RELEASE_KEY, below):
#
#   terraform-provider-hpc_<version>_<os>_<arch>.zip   the binary, terraform-provider-hpc_v<version>, mode 0755
#   terraform-provider-hpc_<version>_manifest.json     a copy of terraform-registry-manifest.json (protocol 6.0)
#   terraform-provider-hpc_<version>_SHA256SUMS        sha256 of the zips and the manifest (sha256sum format)
#   terraform-provider-hpc_<version>_SHA256SUMS.sig    a detached binary GPG signature of the sums
#   terraform-provider-hpc_<version>_signing-key.asc   the signing key's public half, ASCII-armored
#
# The version is Cargo.toml's; the release is refused when CHANGELOG.md's newest entry is another version.
# Archives are reproducible: the same binary gives the same zip and the same SHA256SUMS, whatever the time
# (entries' times are SOURCE_DATE_EPOCH, or the last commit's time; fixed permissions; one entry).
#
# A zip is made for every platform this machine can build (the host's, and any other whose Rust target is
# installed and whose linker is on PATH); for each other platform the registry usually carries it says
# plainly that it is not built and why.
#
# --demo makes a demo release (the main job, scripts/demo.sh, asks for one): signed with a passphrase-less
# throwaway key made once under $HPC_CACHE/release-gnupg (scripts/lib.sh ensure_release_key), whatever
# HPC_RELEASE_KEY and GNUPGHOME say, and its output says DEMO RELEASE at the start and at the end. It is for
# trying the install path on this machine, never for publishing.
#
# Environment:
#   HPC_RELEASE_BINARY=<path>  package this already-built binary for the host platform instead of building
#                              (`cargo build --release --locked`); the acceptance tests pass the binary cargo
#                              built for them, so the test run does not build the provider a second time.
#   HPC_RELEASE_KEY=<key id>   sign with this key from the keyring in GNUPGHOME (a maintainer's key, or the
#                              tests' throwaway key). Required, unless the release is a demo (above): without
#                              it the release is refused, and nothing is signed with a key nobody chose.
#   HPC_RELEASE_DEMO=1         the same as --demo.
#   SOURCE_DATE_EPOCH=<secs>   the time written into the archives (default: the last commit's time).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT" || exit 1

OUT="$ROOT/dist"
DEMO=""
[ "${HPC_RELEASE_DEMO:-}" != 1 ] || DEMO=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=${2:?--out needs a directory}; shift 2 ;;
    --out=*) OUT=${1#--out=}; shift ;;
    --demo) DEMO=1; shift ;;
    -h|--help) sed -n '2,/^source /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument $1 (usage: scripts/release.sh [--out DIR] [--demo])" >&2; exit 2 ;;
  esac
done

fail() { echo "release.sh: $*" >&2; exit 1; }

# Which key signs: a maintainer's, named; or, asked for, the demo's throwaway key. Never one by default.
if [ -z "$DEMO" ] && [ -z "${HPC_RELEASE_KEY:-}" ]; then
  fail "no signing key: set GNUPGHOME and HPC_RELEASE_KEY to a maintainer's key, or pass --demo (or HPC_RELEASE_DEMO=1) for a demo release signed with a throwaway key"
fi
# demo_banner: says, where it cannot be missed, that this release is a demo's.
demo_banner() {
  printf '\n  %s\n' "================================================================================================"
  printf '  DEMO RELEASE: signed with a throwaway key (no passphrase, made on this machine), not a maintainer'"'"'s\n'
  printf '  key. For trying the install path here; never publish it. Its keyring: %s\n' "$HPC_CACHE/release-gnupg"
  printf '  %s\n' "================================================================================================"
}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

VERSION=$(cargo_version)
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  fail "Cargo.toml's version '$VERSION' is not a semantic version (X.Y.Z): the registry orders releases by it"

# The changelog's newest entry must be the version released: `## 0.2.0 (March 4, 2027)`.
NEWEST=$(grep -m 1 '^## ' CHANGELOG.md || true)
CHANGELOG_VERSION=$(printf '%s\n' "$NEWEST" | awk '{print $2}')
[ "$CHANGELOG_VERSION" = "$VERSION" ] ||
  fail "CHANGELOG.md's newest entry is '${NEWEST:-(none)}', not version $VERSION (Cargo.toml): add a '## $VERSION (Month D, YYYY)' section with what changed before releasing"

case "$NEWEST" in
  *"(Unreleased)"*) fail "CHANGELOG.md's entry for $VERSION is headed (Unreleased): date it ('## $VERSION (Month D, YYYY)') when releasing" ;;
esac

python3 - terraform-registry-manifest.json <<'PY' || fail "terraform-registry-manifest.json must be {\"version\": 1, \"metadata\": {\"protocol_versions\": [\"6.0\"]}}: the provider speaks protocol 6"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["version"] == 1 and m["metadata"]["protocol_versions"] == ["6.0"], m
PY

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null) ||
    fail "no SOURCE_DATE_EPOCH and no git history to take the archives' time from: set SOURCE_DATE_EPOCH=<seconds>"
fi

command -v gpg >/dev/null || fail "gpg is not on PATH: GnuPG signs the SHA256SUMS (Debian: apt-get install gnupg)"
OWN_KEYRING=""
if [ -n "$DEMO" ]; then
  demo_banner >&2
  if [ -n "${HPC_RELEASE_KEY:-}" ]; then
    echo "  (HPC_RELEASE_KEY=$HPC_RELEASE_KEY is not used: a demo release is signed with the throwaway key)" >&2
  fi
  { read -r GNUPGHOME; read -r HPC_RELEASE_KEY; } < <(ensure_release_key)
  [ -n "$HPC_RELEASE_KEY" ] || fail "the demo's throwaway key could not be made in $HPC_CACHE/release-gnupg"
  export GNUPGHOME
  OWN_KEYRING=1
fi
gpg --batch --list-secret-keys "$HPC_RELEASE_KEY" >/dev/null 2>&1 ||
  fail "no secret key '$HPC_RELEASE_KEY' in the keyring ${GNUPGHOME:-~/.gnupg}: set GNUPGHOME and HPC_RELEASE_KEY to a signing key"

# The registry's platforms (the scaffolding's release matrix), with the Rust target and the linker each needs.
HOST=$(rustc -vV | awk '$1 == "host:" {print $2}')
PLATFORMS="linux_amd64:x86_64-unknown-linux-gnu:x86_64-linux-gnu-gcc
linux_arm64:aarch64-unknown-linux-gnu:aarch64-linux-gnu-gcc
linux_386:i686-unknown-linux-gnu:i686-linux-gnu-gcc
linux_arm:armv7-unknown-linux-gnueabihf:arm-linux-gnueabihf-gcc
darwin_amd64:x86_64-apple-darwin:x86_64-apple-darwin-clang
darwin_arm64:aarch64-apple-darwin:aarch64-apple-darwin-clang
windows_amd64:x86_64-pc-windows-gnu:x86_64-w64-mingw32-gcc
windows_386:i686-pc-windows-gnu:i686-w64-mingw32-gcc
windows_arm64:aarch64-pc-windows-gnullvm:aarch64-w64-mingw32-clang
freebsd_amd64:x86_64-unknown-freebsd:x86_64-unknown-freebsd-clang"
INSTALLED=$(rustup target list --installed 2>/dev/null || echo "$HOST")

STAGE=$(mktemp -d "$OUT/.release.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
BUILT=() SKIPPED=()

# zip_binary <binary> <platform> <name in the archive>: a reproducible zip (one entry, fixed time and mode).
zip_binary() {
  python3 - "$1" "$STAGE/terraform-provider-hpc_${VERSION}_$2.zip" "$3" "$SOURCE_DATE_EPOCH" <<'PY'
import sys, time, zipfile
binary, archive, name, epoch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
info = zipfile.ZipInfo(name, date_time=time.gmtime(max(epoch, 315532800))[:6])  # zip times start in 1980
info.create_system = 3  # Unix, so the mode below is read
info.external_attr = (0o100755 & 0xFFFF) << 16
info.compress_type = zipfile.ZIP_DEFLATED
with open(binary, "rb") as f:
    data = f.read()
with zipfile.ZipFile(archive, "w") as z:
    z.writestr(info, data)
PY
}

while IFS=: read -r platform target linker; do
  exe="terraform-provider-hpc_v$VERSION"
  case "$platform" in windows_*) exe="$exe.exe" ;; esac
  if [ "$target" = "$HOST" ]; then
    if [ -n "${HPC_RELEASE_BINARY:-}" ]; then
      [ -x "$HPC_RELEASE_BINARY" ] || fail "HPC_RELEASE_BINARY=$HPC_RELEASE_BINARY is not an executable file"
      log "packaging $HPC_RELEASE_BINARY for $platform (HPC_RELEASE_BINARY)"
      binary=$HPC_RELEASE_BINARY
    else
      binary="$(build_provider)/terraform-provider-hpc"
    fi
    zip_binary "$binary" "$platform" "$exe"
    BUILT+=("$platform")
    continue
  fi
  if ! printf '%s\n' "$INSTALLED" | grep -qx "$target"; then
    SKIPPED+=("$platform: not built: Rust's standard library for $target is not installed (rustup has only $(echo "$INSTALLED" | tr ' ' ',')), and 'rustup target add' needs rustup's download server, which this machine cannot reach")
    continue
  fi
  if ! command -v "$linker" >/dev/null; then
    SKIPPED+=("$platform: not built: $target is installed but its linker $linker is not on PATH")
    continue
  fi
  if [ -n "${HPC_RELEASE_BINARY:-}" ]; then
    SKIPPED+=("$platform: not built: HPC_RELEASE_BINARY packages the one binary given, for $HOST")
    continue
  fi
  log "building terraform-provider-hpc for $target (release, linker $linker)"
  var=CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_LINKER
  env "$var=$linker" cargo build --release --locked --quiet --target "$target" --bin terraform-provider-hpc
  src="$CARGO_TARGET_DIR/$target/release/terraform-provider-hpc"
  case "$platform" in windows_*) src="$src.exe" ;; esac
  zip_binary "$src" "$platform" "$exe"
  BUILT+=("$platform")
done <<<"$PLATFORMS"
[ ${#BUILT[@]} -gt 0 ] || fail "this machine ($HOST) is none of the registry's platforms: nothing to release"

cp terraform-registry-manifest.json "$STAGE/terraform-provider-hpc_${VERSION}_manifest.json"
SUMS="terraform-provider-hpc_${VERSION}_SHA256SUMS"
(cd "$STAGE" && sha256sum -- *.zip "terraform-provider-hpc_${VERSION}_manifest.json" | LC_ALL=C sort -k 2 >"$SUMS")
if [ -n "$DEMO" ]; then
  log "signing $SUMS with the DEMO release's throwaway GPG key $HPC_RELEASE_KEY (keyring $GNUPGHOME)"
else
  log "signing $SUMS with GPG key $HPC_RELEASE_KEY (keyring ${GNUPGHOME:-~/.gnupg})"
fi
gpg --batch --yes --quiet --local-user "$HPC_RELEASE_KEY" --detach-sign --output "$STAGE/$SUMS.sig" "$STAGE/$SUMS"
gpg --batch --quiet --armor --export-options export-minimal --export "$HPC_RELEASE_KEY" >"$STAGE/terraform-provider-hpc_${VERSION}_signing-key.asc"
# The demo key's agent was started by this run: stop it (a maintainer's own agent is left alone).
if [ -n "$OWN_KEYRING" ]; then gpgconf --kill gpg-agent 2>/dev/null || true; fi
gpg --batch --quiet --verify "$STAGE/$SUMS.sig" "$STAGE/$SUMS" 2>/dev/null || fail "the signature just made does not verify"

rm -f "$OUT/terraform-provider-hpc_${VERSION}_"*
mv "$STAGE"/terraform-provider-hpc_"${VERSION}"_* "$OUT/"

log "${DEMO:+DEMO }release $VERSION in $OUT"
(cd "$OUT" && ls -l terraform-provider-hpc_"${VERSION}"_* | awk '{printf "  %10d  %s\n", $5, $NF}')
echo "  built: ${BUILT[*]}"
for line in "${SKIPPED[@]}"; do echo "  $line"; done
echo "SHA256SUMS:"
sed 's/^/  /' "$OUT/$SUMS"
[ -z "$DEMO" ] || demo_banner
