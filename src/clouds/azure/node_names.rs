//! Which node each VM of a scale set is. Azure numbers a scale set's VMs itself and never gives a new VM the
//! instance id a deleted one had (see the Semantics table of notes/api-conformance.md), so neither an
//! instance id nor a VM's position in its set can be a node's name: a repaired node would come back under
//! another name, and a VM lost in the middle of a set would move the names of the ones after it. The
//! provider names each VM itself, once, and keeps the names on the scale set: its tag `hpc:nodes` maps
//! instance ids to node indexes. The names are read with the scale set the refresh reads anyway (no call
//! per VM), and a VM learns its own from its `userData` (`hpc-node-name=<name>`), which the provider writes
//! when it names the VM and which the VM reads through the instance metadata service.
//!
//! The encoding: runs of consecutive instance ids holding consecutive indexes, `<first id>-<last id>:<first
//! index>` (`<id>:<index>` for a run of one), joined by commas, in instance-id order: `0-3:0,7:4` is VMs 0 to
//! 3 as nodes 0 to 3 and VM 7 as node 4. A tag value holds at most 256 characters ("Use tags to organize
//! your Azure resources": "The tag value is limited to 256 characters"), so a longer map goes on in
//! `hpc:nodes-1`, `hpc:nodes-2`, ... (never splitting a run). A set of 100 VMs whose ids no longer run
//! together (each repaired once) needs 100 runs of `<id>:<index>`, 4 tags at 6-digit ids, within the 50
//! tags a resource may carry. `none` is a map that names no VM.
//!
//! PURE: tags, ids and ranges in; names, tags and userData out.

use std::collections::BTreeMap;
use std::ops::Range;

use base64::Engine;

/// The scale-set tag holding the map (and the first of its continuation tags, `hpc:nodes-<n>`).
pub const TAG: &str = "hpc:nodes";

/// The longest tag value ARM takes.
pub const TAG_VALUE_MAX: usize = 256;

/// The key of the line of a VM's `userData` that says its node name.
pub const USER_DATA_KEY: &str = "hpc-node-name";

/// The value of [`TAG`] for a map that names no VM.
const EMPTY: &str = "none";

/// What separates a run's first and last instance id (`0-3`), and a continuation tag's number from
/// [`TAG`] (`hpc:nodes-1`).
const DASH: char = '-';

/// The most VMs a run may cover: a scale set holds at most 1,000 VMs, and a longer run is no map of ours.
const MAX_RUN: u64 = 1000;

/// A scale set's VMs by instance id, each with the index of the node it is (`<cluster>-<index>`). No
/// index is held twice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeMap {
    by_id: BTreeMap<u64, u32>,
}

impl NodeMap {
    /// The node index of VM `id`, if the map names it.
    pub fn get(&self, id: u64) -> Option<u32> {
        self.by_id.get(&id).copied()
    }

    /// Whether a VM is node `index`.
    pub fn holds(&self, index: u32) -> bool {
        self.by_id.values().any(|i| *i == index)
    }

    /// VM `id` is node `index` (no other VM is any more).
    pub fn insert(&mut self, id: u64, index: u32) {
        self.by_id.retain(|_, i| *i != index);
        self.by_id.insert(id, index);
    }

    pub fn remove(&mut self, id: u64) {
        self.by_id.remove(&id);
    }

    /// Keeps the VMs `keep` says.
    pub fn retain(&mut self, keep: impl Fn(u64, u32) -> bool) {
        self.by_id.retain(|id, index| keep(*id, *index));
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// (instance id, node index), in instance-id order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.by_id.iter().map(|(id, index)| (*id, *index))
    }

    /// Gives each of `new` (instance ids, in the order given) the lowest index of `range` no VM holds,
    /// while one is free: what a grow or a repair names its new VMs. A VM past the free indexes stays
    /// unnamed. Returns the VMs named.
    pub fn assign(&mut self, new: &[u64], range: Range<u32>) -> Vec<(u64, u32)> {
        let taken: Vec<u32> = self.by_id.values().copied().collect();
        let mut free = range.filter(|i| !taken.contains(i));
        let mut named = Vec::new();
        for id in new {
            if self.by_id.contains_key(id) {
                continue;
            }
            let Some(index) = free.next() else { break };
            self.by_id.insert(*id, index);
            named.push((*id, index));
        }
        named
    }

    /// The map of a scale set made before the provider kept one: its VMs named by their position in it,
    /// in instance-id order, the first `size` of them from `first` (those past it unnamed).
    pub fn by_position(ids: &[u64], first: u32, size: u32) -> NodeMap {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        NodeMap { by_id: sorted.into_iter().zip(first..first.saturating_add(size)).collect() }
    }

    /// The runs of the encoding, in instance-id order.
    fn runs(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut run: Option<(u64, u64, u32)> = None;
        for (id, index) in self.iter() {
            run = match run {
                Some((first, last, at)) if id == last + 1 && u64::from(index) == u64::from(at) + (id - first) => Some((first, id, at)),
                Some(done) => {
                    out.push(run_text(done));
                    Some((id, id, index))
                }
                None => Some((id, id, index)),
            };
        }
        out.extend(run.map(run_text));
        out
    }

    /// The values of [`TAG`] and its continuation tags, each at most [`TAG_VALUE_MAX`] characters.
    pub fn encode(&self) -> Vec<String> {
        let runs = self.runs();
        if runs.is_empty() {
            return vec![EMPTY.to_owned()];
        }
        let mut chunks: Vec<String> = Vec::new();
        for run in runs {
            match chunks.last_mut() {
                Some(c) if c.len() + 1 + run.len() <= TAG_VALUE_MAX => {
                    c.push(',');
                    c.push_str(&run);
                }
                _ => chunks.push(run),
            }
        }
        chunks
    }

    /// `tags` with the map in them: the map's tags replace whatever map tags they held.
    pub fn into_tags(&self, tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = tags.iter().filter(|(k, _)| !is_map_tag(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        for (i, chunk) in self.encode().into_iter().enumerate() {
            out.insert(chunk_tag(i), chunk);
        }
        out
    }

    /// The map a scale set's tags hold; None for a set without one (made before the provider kept one) or
    /// with one that does not read (then its VMs are named by position, as before, until the next apply
    /// writes the map again).
    pub fn from_tags(tags: &BTreeMap<String, String>) -> Option<NodeMap> {
        let first = tags.get(TAG)?;
        if first == EMPTY {
            return Some(NodeMap::default());
        }
        let mut text = first.clone();
        for i in 1.. {
            let Some(more) = tags.get(&chunk_tag(i)) else { break };
            text.push(',');
            text.push_str(more);
        }
        let mut map = NodeMap::default();
        for run in text.split(',') {
            let (ids, index) = run.split_once(':')?;
            let index: u32 = index.parse().ok()?;
            let (first, last) = match ids.split_once(DASH) {
                Some((a, b)) => (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?),
                None => (ids.parse::<u64>().ok()?, ids.parse::<u64>().ok()?),
            };
            if last < first || last - first >= MAX_RUN || last - first > u64::from(u32::MAX - index) {
                return None;
            }
            for (k, id) in (first..=last).enumerate() {
                let index = index + k as u32;
                // A map written by the provider never names a node twice: a second claim is no name.
                if !map.holds(index) && !map.by_id.contains_key(&id) {
                    map.by_id.insert(id, index);
                }
            }
        }
        Some(map)
    }
}

fn run_text((first, last, index): (u64, u64, u32)) -> String {
    if first == last { format!("{first}:{index}") } else { format!("{first}{DASH}{last}:{index}") }
}

/// The tag of chunk `i` of the map: `hpc:nodes`, `hpc:nodes-1`, ...
fn chunk_tag(i: usize) -> String {
    if i == 0 { TAG.to_owned() } else { format!("{TAG}{DASH}{i}") }
}

/// Whether a tag is one of the map's.
pub fn is_map_tag(key: &str) -> bool {
    let number = key.strip_prefix(TAG).and_then(|r| r.strip_prefix(DASH));
    key == TAG || number.is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// A VM's `userData` (base64, as ARM takes it) saying its node name.
pub fn user_data(name: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{USER_DATA_KEY}={name}\n"))
}

/// The node name a VM's `userData` says, if any.
pub fn name_in_user_data(user_data: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(user_data.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.lines().find_map(|l| l.strip_prefix(USER_DATA_KEY)?.strip_prefix('=')).map(|n| n.trim().to_owned()).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(u64, u32)]) -> NodeMap {
        let mut m = NodeMap::default();
        for (id, index) in pairs {
            m.insert(*id, *index);
        }
        m
    }

    #[test]
    fn runs_of_consecutive_ids_and_indexes_are_written_compactly() {
        let m = map(&[(0, 0), (1, 1), (2, 2), (3, 3), (7, 4)]);
        assert_eq!(m.encode(), ["0-3:0,7:4"]);
        let tags = m.into_tags(&BTreeMap::from([("team".to_owned(), "ml".to_owned())]));
        assert_eq!(tags.get(TAG).map(String::as_str), Some("0-3:0,7:4"));
        assert_eq!(tags.get("team").map(String::as_str), Some("ml"), "the other tags are kept");
        assert_eq!(NodeMap::from_tags(&tags), Some(m));
        // A repaired node (VM 9 as node 1) breaks the run.
        assert_eq!(map(&[(0, 0), (2, 2), (3, 3), (9, 1)]).encode(), ["0:0,2-3:2,9:1"]);
        assert_eq!(NodeMap::default().encode(), ["none"]);
        assert_eq!(NodeMap::from_tags(&NodeMap::default().into_tags(&BTreeMap::new())), Some(NodeMap::default()));
    }

    #[test]
    fn a_map_past_one_tag_value_goes_on_in_numbered_tags_and_reads_back_whole() {
        // 100 VMs none of whose ids run together, at 6-digit ids.
        let m: NodeMap = map(&(0..100u32).map(|i| (100_000 + 2 * u64::from(i), 99 - i)).collect::<Vec<_>>());
        let chunks = m.encode();
        assert!(chunks.iter().all(|c| c.len() <= TAG_VALUE_MAX), "{chunks:?}");
        assert_eq!(chunks.len(), 4, "well within ARM's 50 tags");
        let tags = m.into_tags(&BTreeMap::new());
        assert!(tags.contains_key("hpc:nodes-1"));
        assert_eq!(NodeMap::from_tags(&tags), Some(m.clone()));
        // Written again smaller, the stale continuation tags go.
        let small = map(&[(1, 0)]);
        let again = small.into_tags(&tags);
        assert_eq!(again.keys().filter(|k| is_map_tag(k)).count(), 1, "{again:?}");
        assert_eq!(NodeMap::from_tags(&again), Some(small));
    }

    #[test]
    fn a_set_without_a_map_or_with_one_that_does_not_read_has_none() {
        assert_eq!(NodeMap::from_tags(&BTreeMap::new()), None);
        for bad in ["x", "1:", "3-1:0", "1:a", "1-2-3:0", "18446744073709551615-0:0", "0-5000000000:4294967295", "0-4000000000:0"] {
            let tags = BTreeMap::from([(TAG.to_owned(), bad.to_owned())]);
            assert_eq!(NodeMap::from_tags(&tags), None, "{bad}");
        }
        // A node claimed twice keeps its first VM.
        let tags = BTreeMap::from([(TAG.to_owned(), "0:0,1:0".to_owned())]);
        assert_eq!(NodeMap::from_tags(&tags), Some(map(&[(0, 0)])));
        assert!(is_map_tag("hpc:nodes") && is_map_tag("hpc:nodes-12"));
        assert!(!is_map_tag("hpc:nodes-") && !is_map_tag("hpc:nodesx") && !is_map_tag("hpc:node-revisions"));
    }

    #[test]
    fn new_vms_take_the_lowest_free_indexes_of_their_sets_range() {
        // Nodes 100..104 of the second set: node 101 lost, its VM gone.
        let mut m = map(&[(0, 100), (2, 102), (3, 103)]);
        assert_eq!(m.assign(&[4, 5], 100..104), [(4, 101)], "the repair takes the lost node's name; no room for VM 5");
        assert_eq!(m.get(5), None);
        let mut grown = map(&[(0, 0), (1, 1)]);
        assert_eq!(grown.assign(&[6, 7], 0..4), [(6, 2), (7, 3)]);
        assert_eq!(NodeMap::by_position(&[9, 2, 5], 10, 2), map(&[(2, 10), (5, 11)]), "the third VM is past the set's size");
    }

    #[test]
    fn a_vms_user_data_says_its_name() {
        let ud = user_data("train-7");
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(&ud).unwrap(), b"hpc-node-name=train-7\n");
        assert_eq!(name_in_user_data(&ud).as_deref(), Some("train-7"));
        for other in ["", "!!", &base64::engine::general_purpose::STANDARD.encode("#cloud-config\n")] {
            assert_eq!(name_in_user_data(other), None, "{other}");
        }
    }

    #[test]
    fn the_join_script_reads_the_line_the_provider_writes() {
        let join = include_str!("../../../node/slurm-join.sh");
        assert!(join.contains(&format!("s/^{USER_DATA_KEY}=//p")), "node/slurm-join.sh reads {USER_DATA_KEY}=<name>");
    }
}
