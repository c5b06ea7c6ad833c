//! Who owns a piece in the cloud, and the one rule every resource and every cloud goes through.
//!
//! Every piece a resource instance creates carries its owner's marker (a tag, label or description
//! field, `hpc:owner`), and the same marker is recorded in that instance's state (`owner`). Observe,
//! converge, read and delete keep only the pieces with this instance's marker ([`Census::admit`]); pieces
//! of another owner that carry the same names are recorded instead, so that
//! - a create whose names are taken by another owner is refused before anything is created or changed
//!   ([`Census::gate`], with the diagnostic [`Census::refusal`] on `name`);
//! - destroy and update leave them alone and say so ([`Census::left_alone`]);
//! - import adopts the marker the pieces carry ([`Census::adopting`], [`Census::adopted`]).
//!
//! A create interrupted so hard that its state never reached the CLI (the provider killed) is resumed by
//! the next apply from the same working directory and workspace through the [`journal`]: the marker is
//! written there before the first piece is made and removed once the state is handed back. Nothing else
//! adopts pieces by name. State written before markers existed is upgraded to a legacy marker
//! ([`Owner::legacy`]), which also owns the unmarked pieces with its names: the first refresh records it
//! and changes nothing in the cloud.
//!
//! Must not: know any cloud's API or vocabulary beyond the marker's spelling (clouds translate their
//! tags, labels and descriptions to [`marker_in`] themselves).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::framework::Value;

/// The tag key of the owner marker (Google labels spell it `hpc_owner`).
pub const KEY: &str = "hpc:owner";

/// The state attribute that records the marker.
pub const ATTRIBUTE: &str = "owner";

const LEGACY: &str = "legacy-";

/// The resource instance a piece belongs to, as its marker spells it: `<created UTC>-<64 random bits>`
/// (`20261201t083555z-3f9a1c2b7d4e6a01`, valid as a tag, a label and inside a description), or
/// `legacy-<hash of the id>` for state written before markers existed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    marker: String,
}

impl Owner {
    /// A new owner for a create, minted from the clock and the system's random source.
    pub fn mint() -> Owner {
        let mut random = [0u8; 8];
        let _ = aws_lc_rs::rand::fill(&mut random);
        Owner { marker: format!("{}-{}", crate::clock::compact_stamp(crate::clock::now_secs()), hex(&random)) }
    }

    /// The owner of state written before markers existed: derived from the resource's type and id, so
    /// every upgrade of the same state agrees.
    pub fn legacy(resource_type: &str, id: &str) -> Owner {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, format!("{resource_type}\n{id}").as_bytes());
        Owner { marker: format!("{LEGACY}{}", hex(&digest.as_ref()[..8])) }
    }

    /// The owner a marker names, if it is one.
    pub fn parse(marker: &str) -> Option<Owner> {
        let ok = (1..=63).contains(&marker.len())
            && marker.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && marker.contains('-');
        ok.then(|| Owner { marker: marker.to_owned() })
    }

    /// The owner recorded in a state; state without one (written before markers existed, and not yet
    /// upgraded) is the legacy owner of its id.
    pub fn of_state(resource_type: &str, state: &Value) -> Owner {
        match state.get(ATTRIBUTE).as_str().and_then(Owner::parse) {
            Some(o) => o,
            None => Owner::legacy(resource_type, state.get("id").as_str().unwrap_or_default()),
        }
    }

    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// An owner from before markers: it also owns the unmarked pieces with its names.
    pub fn is_legacy(&self) -> bool {
        self.marker.starts_with(LEGACY)
    }

    /// Whether a piece with this marker (or none) is this owner's.
    pub fn admits(&self, marker: Option<&str>) -> bool {
        match marker {
            Some(m) => m == self.marker,
            None => self.is_legacy(),
        }
    }
}

/// When the owner behind a marker was minted, as `2026-12-01 08:35:55 UTC`.
pub fn created_of(marker: &str) -> Option<String> {
    crate::clock::compact_stamp_readable(marker.split('-').next()?)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The marker among a piece's tags or labels (`hpc:owner`, or Google's `hpc_owner`).
pub fn marker_in(tags: &BTreeMap<String, String>) -> Option<&str> {
    tags.get(KEY).or_else(|| tags.get("hpc_owner")).map(String::as_str)
}

/// The marker in a JSON tag object (Azure tags, OCI freeform tags).
pub fn marker_in_json(tags: &serde_json::Value) -> Option<&str> {
    tags.get(KEY).or_else(|| tags.get("hpc_owner")).and_then(serde_json::Value::as_str)
}

/// One piece that carries this resource's names but is not its owner's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sighting {
    /// The piece's kind in the official providers' vocabulary (`aws_instance`).
    pub kind: String,
    /// Its name or the cloud's id for it.
    pub name: String,
    /// Its owner's marker; `None` for a piece without one (made before markers, or by hand).
    pub marker: Option<String>,
    /// When the cloud says it was made, where it says so.
    pub created: Option<String>,
}

/// How a create relates to earlier ones of the same resource instance, as the [`journal`] tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Nothing earlier: the names must be free of other owners' pieces.
    Fresh,
    /// An earlier create was cut off before its state reached the CLI (the provider killed): it goes on
    /// under the same marker with what it had made.
    Interrupted,
    /// The create half of replacing this instance's own tainted object (a create that failed or was
    /// interrupted with Ctrl-C, whose pieces the delete half just removed): it goes on under the same
    /// marker, since the names were this instance's until a moment ago.
    Replacing,
}

/// What this apply, refresh or import is doing, for [`Census::gate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Create(Start),
    /// Updating, refreshing or destroying an instance whose state records its owner.
    Own,
    /// Importing: every piece with the names is admitted, and the markers they carry are noted.
    Adopt,
    /// Reading another resource's pieces (a cluster reading its fabric's network): everything admitted.
    Read,
}

/// The pieces one operation saw: it admits this owner's and records everyone else's.
#[derive(Debug)]
pub struct Census {
    owner: Owner,
    mode: Mode,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    mine: usize,
    others: Vec<Sighting>,
    adopted: BTreeMap<Option<String>, usize>,
    refused: bool,
    /// Gates passed so far: a refusal after one has passed may leave pieces made in between.
    passed: usize,
    import_id: Option<String>,
}

impl Census {
    /// For a create by `owner`, started as the journal says.
    pub fn creating(owner: Owner, start: Start) -> Census {
        Census::new(owner, Mode::Create(start))
    }

    /// For an update, refresh or destroy of an instance whose state records `owner`.
    pub fn owned(owner: Owner) -> Census {
        Census::new(owner, Mode::Own)
    }

    /// For an import: admits every piece with the names and notes their markers.
    pub fn adopting() -> Census {
        Census::new(Owner { marker: String::new() }, Mode::Adopt)
    }

    /// For reading another resource's pieces, which this one neither changes nor deletes.
    pub fn reading() -> Census {
        Census::new(Owner { marker: String::new() }, Mode::Read)
    }

    fn new(owner: Owner, mode: Mode) -> Census {
        Census { owner, mode, seen: Mutex::new(Seen::default()) }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    pub fn is_creating(&self) -> bool {
        matches!(self.mode, Mode::Create(_))
    }

    /// The marker new pieces get: this owner's (nothing while importing or reading).
    pub fn marker(&self) -> Option<&str> {
        matches!(self.mode, Mode::Create(_) | Mode::Own).then(|| self.owner.marker())
    }

    /// Whether a piece with these names and `marker` is this resource's to change or delete. Pieces of
    /// other owners are recorded (once per kind and name) for the gate and the diagnostics.
    pub fn admit(&self, kind: &str, name: &str, marker: Option<&str>, created: Option<&str>) -> bool {
        let mut seen = self.seen();
        match self.mode {
            Mode::Read => true,
            Mode::Adopt => {
                *seen.adopted.entry(marker.map(str::to_owned)).or_default() += 1;
                true
            }
            Mode::Create(_) | Mode::Own => {
                if self.owner.admits(marker) {
                    seen.mine += 1;
                    return true;
                }
                if !seen.others.iter().any(|s| s.kind == kind && s.name == name) {
                    seen.others.push(Sighting {
                        kind: kind.to_owned(),
                        name: name.to_owned(),
                        marker: marker.map(str::to_owned),
                        created: created.map(str::to_owned),
                    });
                }
                false
            }
        }
    }

    /// Whether a piece with `marker` is this operation's to use, without recording anything: for pieces
    /// found by id rather than by name (a network given to join).
    pub fn claims(&self, marker: Option<&str>) -> bool {
        match self.mode {
            Mode::Read | Mode::Adopt => true,
            Mode::Create(_) | Mode::Own => self.owner.admits(marker),
        }
    }

    /// [`Census::admit`] for a piece whose marker is among its tags or labels.
    pub fn admit_tagged(&self, kind: &str, name: &str, tags: &BTreeMap<String, String>, created: Option<&str>) -> bool {
        self.admit(kind, name, marker_in(tags), created)
    }

    /// Called by every create after it has looked and before it makes or changes anything: refuses when
    /// the names are taken by another owner, unless it goes on with what an interrupted create of its own
    /// made or replaces its own tainted object. Updates and destroys pass (they only ever touch what
    /// [`Census::admit`] admitted).
    pub fn gate(&self) -> Result<(), String> {
        let mut seen = self.seen();
        let Mode::Create(start) = self.mode else { return Ok(()) };
        let goes_on = match start {
            Start::Fresh => false,
            Start::Interrupted => seen.mine > 0,
            Start::Replacing => true,
        };
        if seen.others.is_empty() || goes_on {
            seen.passed += 1;
            return Ok(());
        }
        seen.refused = true;
        Err(format!("the name is taken by {} piece(s) of another owner; nothing was created or changed", seen.others.len()))
    }

    /// [`Census::gate`] for a look ahead at pieces made later in the same create (a cluster's nodes before
    /// its own network): it refuses the same way, and passing it makes nothing.
    pub fn look_ahead(&self) -> Result<(), String> {
        self.gate()?;
        let mut seen = self.seen();
        seen.passed = seen.passed.saturating_sub(1);
        Ok(())
    }

    /// Whether [`Census::gate`] refused.
    pub fn refused(&self) -> bool {
        self.seen().refused
    }

    /// Whether a gate passed before the refusal, so that something may have been made in between (a
    /// cluster's own network before its nodes were refused).
    pub fn made_before_refusal(&self) -> bool {
        self.seen().passed > 0
    }

    /// The id an import of the other owner's pieces would take, for the refusal's advice.
    pub fn set_import_id(&self, id: impl Into<String>) {
        self.seen().import_id = Some(id.into());
    }

    pub fn import_id(&self) -> Option<String> {
        self.seen().import_id.clone()
    }

    /// The pieces of other owners seen so far.
    pub fn others(&self) -> Vec<Sighting> {
        self.seen().others.clone()
    }

    /// For an import: the one marker the admitted pieces carry (`Ok(None)` when none carries one), or the
    /// markers when pieces of several owners answer to the names.
    pub fn adopted(&self) -> Result<Option<String>, Vec<Option<String>>> {
        let seen = self.seen();
        let markers: Vec<Option<String>> = seen.adopted.keys().cloned().collect();
        match markers.as_slice() {
            [] => Ok(None),
            [one] => Ok(one.clone()),
            _ => Err(markers),
        }
    }

    /// The refusal's detail: what exists, whose it is and when it was made, and the two ways out.
    pub fn refusal(&self, what: &str, name: &str) -> String {
        let mut text = format!(
            "{what} {name:?} cannot be created: pieces with its names already exist and belong to another owner (another state, \
             workspace or configuration), and creating it would change or delete them:\n{}\nNothing was created or changed. Either choose \
             another name for this one (name = \"{name}2\", say), or adopt the existing pieces into this state with import",
            summary(&self.others())
        );
        match self.import_id() {
            Some(id) => text.push_str(&format!(" (import id {id:?})")),
            None => text.push_str(" (see the resource's import id in the docs)"),
        }
        text.push_str(", and then remove them from the other state so that only one state manages them.");
        text
    }

    /// The warning a destroy or update gives when it left same-named pieces of another owner alone.
    pub fn left_alone(&self, what: &str, name: &str) -> Option<String> {
        let others = self.others();
        (!others.is_empty()).then(|| {
            format!(
                "{what} {name:?} changed and deleted only its own pieces. These carry its names but belong to another owner, and were \
                 left as they are:\n{}",
                summary(&others)
            )
        })
    }
}

/// Sightings grouped by kind and owner: `- 4 x aws_instance (train-0, ...), owner ..., created ...`.
fn summary(others: &[Sighting]) -> String {
    let mut groups: BTreeMap<(String, Option<String>), Vec<&Sighting>> = BTreeMap::new();
    for s in others {
        groups.entry((s.kind.clone(), s.marker.clone())).or_default().push(s);
    }
    let mut lines = Vec::new();
    for ((kind, marker), items) in groups {
        let mut names: Vec<&str> = items.iter().map(|s| s.name.as_str()).collect();
        names.sort();
        let shown = if names.len() > 4 { format!("{}, ... {}", names[..3].join(", "), names[names.len() - 1]) } else { names.join(", ") };
        let owner = match &marker {
            Some(m) => format!("owner {m}"),
            None => "no owner marker (made before markers existed, or outside this provider)".to_owned(),
        };
        let created = marker
            .as_deref()
            .and_then(created_of)
            .or_else(|| items.iter().filter_map(|s| s.created.clone()).min())
            .map_or_else(|| "created at an unknown time".to_owned(), |c| format!("created {c}"));
        lines.push(format!("  - {} x {kind} ({shown}), {owner}, {created}", items.len()));
    }
    lines.join("\n")
}

pub mod journal {
    //! Creates in flight, kept in the working directory (`.terraform/hpc-provider/pending/`, or under
    //! `TF_DATA_DIR`), one file per resource instance and workspace. The marker is written before a create
    //! makes its first piece. When the create hands its state back it is forgotten, unless it failed (the
    //! CLI then keeps the object tainted and replaces it): the entry stays, and the delete half of that
    //! replacement marks it released so that the create half goes on under the same marker. An entry still
    //! pending at the next create means the provider died mid-create (killed, out of memory, the machine
    //! lost): that create resumes under the same marker. The journal is on only in the plugin process
    //! ([`enable`]), never in tests that call resources directly.

    use std::path::PathBuf;
    use std::sync::OnceLock;

    use super::{Owner, Start};

    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

    /// How long after the delete half of a replacement its create half still counts as replacing.
    const REPLACING_FOR_SECS: u64 = 15 * 60;

    /// Turns the journal on for this process, in the CLI's data directory under the working directory.
    pub fn enable() {
        let data = std::env::var_os("TF_DATA_DIR").map_or_else(|| PathBuf::from(".terraform"), PathBuf::from);
        let _ = DIR.set(Some(data));
    }

    /// Turns it on in a directory of a test's choosing.
    pub fn enable_in(data_dir: PathBuf) {
        let _ = DIR.set(Some(data_dir));
    }

    fn data_dir() -> Option<&'static PathBuf> {
        DIR.get().and_then(Option::as_ref)
    }

    /// The workspace the CLI runs in: `TF_WORKSPACE`, else the one `workspace select` recorded.
    fn workspace(data: &std::path::Path) -> String {
        std::env::var("TF_WORKSPACE")
            .ok()
            .filter(|w| !w.is_empty())
            .or_else(|| std::fs::read_to_string(data.join("environment")).ok().map(|s| s.trim().to_owned()).filter(|w| !w.is_empty()))
            .unwrap_or_else(|| "default".to_owned())
    }

    fn path(key: &str) -> Option<PathBuf> {
        let data = data_dir()?;
        let full = format!("{}\n{key}", workspace(data));
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, full.as_bytes());
        Some(data.join("hpc-provider").join("pending").join(format!("{}.json", super::hex(&digest.as_ref()[..16]))))
    }

    fn now() -> u64 {
        crate::clock::now_secs()
    }

    fn read(key: &str) -> Option<serde_json::Value> {
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path(key)?).ok()?).ok()?;
        (json["key"].as_str() == Some(key)).then_some(json)
    }

    fn write(key: &str, owner: &Owner, state: &str) -> Result<(), String> {
        let Some(path) = path(key) else { return Ok(()) };
        let dir = path.parent().unwrap_or(&path).to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let pid = std::process::id();
        let body =
            serde_json::json!({"key": key, "owner": owner.marker(), "state": state, "at": now(), "pid": pid, "started": started(pid)});
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(body.to_string().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&dir)?.sync_all()
        };
        write().map_err(|e| format!("recording the create in {}: {e}", path.display()))
    }

    /// When process `pid` started (clock ticks since boot, `/proc/<pid>/stat` field 22), which tells it from a
    /// later process given the same pid; None where there is no `/proc` or no such process.
    fn started(pid: u32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) is in parentheses and may hold spaces: count from after it.
        let rest = &stat[stat.rfind(')')? + 1..];
        rest.split_whitespace().nth(19)?.parse().ok()
    }

    /// Whether the entry is a create still running in another provider process (its pid alive, started when
    /// the entry says), rather than one that died.
    fn running_elsewhere(json: &serde_json::Value) -> Option<u32> {
        let pid = u32::try_from(json["pid"].as_u64()?).ok()?;
        let alive = pid != std::process::id() && json["state"].as_str() == Some("pending") && started(pid).is_some();
        (alive && json["started"].as_u64() == started(pid)).then_some(pid)
    }

    /// How a create of `key` starts: under the owner of an earlier one the journal names (interrupted, or
    /// the create half of replacing it), or `None` for a fresh create. A create still running in another
    /// provider process is not an earlier one: it is never adopted (see [`begin`]).
    pub fn earlier(key: &str) -> Option<(Owner, Start)> {
        let json = read(key)?;
        if running_elsewhere(&json).is_some() {
            return None;
        }
        let owner = json["owner"].as_str().and_then(Owner::parse)?;
        match json["state"].as_str() {
            Some("released") if now().saturating_sub(json["at"].as_u64().unwrap_or(0)) <= REPLACING_FOR_SECS => {
                Some((owner, Start::Replacing))
            }
            Some("released") => None,
            // Pending (never handed back) or failed (handed back tainted, its state since lost).
            _ => Some((owner, Start::Interrupted)),
        }
    }

    /// Records that a create of `key` by `owner` is starting (written and synced before it makes anything).
    /// Refused while another provider process is creating the same resource from the same directory and
    /// workspace (two applies with the state lock off): neither adopts the other's marker.
    pub fn begin(key: &str, owner: &Owner) -> Result<(), String> {
        if let Some(pid) = read(key).as_ref().and_then(running_elsewhere) {
            return Err(format!(
                "another apply in this directory (provider process {pid}) is creating {key} now: wait for it to finish, \
                 and do not run two applies of one workspace at once (keep the state lock on)"
            ));
        }
        write(key, owner, "pending")
    }

    /// The create of `key` handed its state back: forgotten, or kept when it failed (the object is
    /// tainted and the next apply replaces it).
    pub fn end(key: &str, owner: &Owner, failed: bool) {
        if failed {
            let _ = write(key, owner, "failed");
        } else if let Some(path) = path(key) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// A destroy of `key` by `owner` finished: if it removed a failed create's object (the delete half of
    /// its replacement), the create half that may follow goes on under the same marker.
    pub fn deleted(key: &str, owner: &Owner) {
        let Some(json) = read(key) else { return };
        if json["owner"].as_str() == Some(owner.marker()) && json["state"].as_str() == Some("failed") {
            let _ = write(key, owner, "released");
        } else if json["state"].as_str() == Some("released") {
            end(key, owner, false);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Two applies of one workspace at once (the state lock off): the second never adopts the marker of
        /// the create still running in the first's process, and is refused; once that process is gone its
        /// entry is an interrupted create, resumed as before.
        #[test]
        fn a_create_running_in_another_process_is_not_adopted_and_refuses_a_second() {
            let dir = tempfile::tempdir().unwrap();
            enable_in(dir.path().to_path_buf());
            let key = "hpc_gpu_cluster|gcp|journal-pid-test";
            let theirs = Owner::mint();
            let mut other = std::process::Command::new("sleep").arg("60").spawn().unwrap();
            let pid = other.id();
            let entry = serde_json::json!({"key": key, "owner": theirs.marker(), "state": "pending", "at": now(), "pid": pid,
                "started": started(pid)});
            let file = path(key).unwrap();
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, entry.to_string()).unwrap();
            assert_eq!(earlier(key), None, "a create still running elsewhere is not this one's to resume");
            let e = begin(key, &Owner::mint()).unwrap_err();
            assert!(e.contains(&format!("provider process {pid}")), "{e}");
            other.kill().unwrap();
            other.wait().unwrap();
            assert_eq!(earlier(key), Some((theirs, Start::Interrupted)), "its process is gone: an interrupted create");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_valid_labels_and_name_their_time() {
        let o = Owner::mint();
        let m = o.marker();
        assert!(m.len() <= 63 && m.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{m}");
        assert_eq!(Owner::parse(m), Some(o.clone()));
        assert!(created_of(m).is_some_and(|c| c.starts_with("20") && c.ends_with(" UTC")), "{m}");
        assert_ne!(Owner::mint(), o, "two creates get two owners");
        assert_eq!(created_of("20261201t083555z-3f9a1c2b7d4e6a01").as_deref(), Some("2026-12-01 08:35:55 UTC"));
    }

    #[test]
    fn legacy_owners_are_stable_and_own_unmarked_pieces() {
        let a = Owner::legacy("hpc_gpu_cluster", "aws/us-east-1/train");
        assert_eq!(a, Owner::legacy("hpc_gpu_cluster", "aws/us-east-1/train"));
        assert_ne!(a, Owner::legacy("hpc_gpu_cluster", "aws/us-west-2/train"));
        assert!(a.is_legacy() && a.admits(None) && a.admits(Some(a.marker())) && !a.admits(Some("20261201t083555z-00")));
        let new = Owner::mint();
        assert!(!new.admits(None), "a new owner never takes unmarked pieces");
        let state = Value::object([("id", Value::from("aws/us-east-1/train"))]);
        assert_eq!(Owner::of_state("hpc_gpu_cluster", &state), a);
    }

    #[test]
    fn a_create_is_refused_when_another_owner_has_the_names() {
        let c = Census::creating(Owner::mint(), Start::Fresh);
        assert!(!c.admit("aws_instance", "train-0", Some("20250101t000000z-aaaa"), None));
        assert!(!c.admit("aws_instance", "train-1", Some("20250101t000000z-aaaa"), None));
        assert!(!c.admit("aws_launch_template", "train-lt", None, Some("2025-01-01")));
        assert!(c.gate().is_err() && c.refused());
        let text = c.refusal("Cluster", "train");
        assert!(
            text.contains("2 x aws_instance (train-0, train-1), owner 20250101t000000z-aaaa, created 2025-01-01 00:00:00 UTC"),
            "{text}"
        );
        assert!(text.contains("1 x aws_launch_template (train-lt), no owner marker"), "{text}");
        assert!(text.contains("choose another name") && text.contains("import"), "{text}");
    }

    #[test]
    fn a_resumed_create_goes_on_beside_another_owner_but_a_fresh_one_does_not() {
        let mine = Owner::mint();
        let resumed = Census::creating(mine.clone(), Start::Interrupted);
        assert!(resumed.admit("aws_instance", "train-0", Some(mine.marker()), None));
        assert!(!resumed.admit("aws_instance", "train-0", Some("20250101t000000z-aaaa"), None));
        assert!(resumed.gate().is_ok());
        let nothing_yet = Census::creating(mine.clone(), Start::Interrupted);
        assert!(!nothing_yet.admit("aws_instance", "train-0", Some("20250101t000000z-aaaa"), None));
        assert!(nothing_yet.gate().is_err(), "a resume that finds nothing of its own is a fresh create");
        let replacing = Census::creating(mine, Start::Replacing);
        assert!(!replacing.admit("aws_instance", "train-0", Some("20250101t000000z-aaaa"), None));
        assert!(replacing.gate().is_ok(), "replacing its own tainted object, the names were its own");
        assert!(replacing.left_alone("Cluster", "train").is_some(), "and what it left alone is said");
        let alone = Census::creating(Owner::mint(), Start::Fresh);
        assert!(alone.gate().is_ok(), "free names");
    }

    #[test]
    fn updates_and_destroys_pass_the_gate_and_report_what_they_left() {
        let o = Owner::mint();
        let c = Census::owned(o.clone());
        assert!(c.admit("aws_instance", "train-0", Some(o.marker()), None));
        assert!(!c.admit("aws_instance", "train-0", Some("20250101t000000z-bbbb"), None));
        assert!(c.gate().is_ok());
        let left = c.left_alone("Cluster", "train").unwrap();
        assert!(left.contains("1 x aws_instance (train-0), owner 20250101t000000z-bbbb"), "{left}");
        assert!(Census::owned(o).left_alone("Cluster", "train").is_none());
    }

    #[test]
    fn an_import_adopts_the_one_marker_the_pieces_carry() {
        let c = Census::adopting();
        assert!(c.admit("aws_instance", "train-0", Some("20250101t000000z-aaaa"), None));
        assert!(c.admit("aws_instance", "train-1", Some("20250101t000000z-aaaa"), None));
        assert_eq!(c.adopted(), Ok(Some("20250101t000000z-aaaa".into())));
        c.admit("aws_instance", "train-2", None, None);
        assert!(c.adopted().is_err());
        assert_eq!(Census::adopting().adopted(), Ok(None));
    }

    #[test]
    fn the_journal_resumes_killed_creates_and_carries_a_failed_one_through_its_replacement() {
        let dir = tempfile::tempdir().unwrap();
        journal::enable_in(dir.path().to_path_buf());
        let key = "hpc_gpu_cluster|aws|us-east-1|||||aws/us-east-1/f|journal-test";
        assert_eq!(journal::earlier(key), None, "nothing earlier: a fresh create");
        let owner = Owner::mint();
        journal::begin(key, &owner).unwrap();
        // Killed before handing its state back: the next create resumes it.
        assert_eq!(journal::earlier(key), Some((owner.clone(), Start::Interrupted)));
        // Handed back after a success: forgotten.
        journal::end(key, &owner, false);
        assert_eq!(journal::earlier(key), None);
        // Handed back after a failure (tainted): the delete half of the replacement releases it, and the
        // create half goes on under the same owner.
        journal::begin(key, &owner).unwrap();
        journal::end(key, &owner, true);
        journal::deleted(key, &Owner::mint());
        assert_eq!(journal::earlier(key), Some((owner.clone(), Start::Interrupted)), "another owner's delete changes nothing");
        journal::deleted(key, &owner);
        assert_eq!(journal::earlier(key), Some((owner.clone(), Start::Replacing)));
        // A destroy with no create after it: the next destroy of the key forgets it.
        journal::deleted(key, &owner);
        assert_eq!(journal::earlier(key), None);
        // Another workspace of the same directory has a journal of its own.
        journal::begin(key, &owner).unwrap();
        // Only the journal reads TF_WORKSPACE, and only this test uses the journal.
        unsafe { std::env::set_var("TF_WORKSPACE", "staging") };
        assert_eq!(journal::earlier(key), None, "staging does not resume dev's create");
        unsafe { std::env::remove_var("TF_WORKSPACE") };
        assert_eq!(journal::earlier(key), Some((owner, Start::Interrupted)));
    }

    #[test]
    fn many_pieces_are_summarised() {
        let c = Census::owned(Owner::mint());
        for i in 0..10 {
            c.admit("google_compute_instance", &format!("n-{i}"), Some("20250101t000000z-cccc"), None);
        }
        let text = c.left_alone("Cluster", "n").unwrap();
        assert!(text.contains("10 x google_compute_instance (n-0, n-1, n-2, ... n-9)"), "{text}");
    }
}
