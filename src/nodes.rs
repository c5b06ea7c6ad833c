//! Node names and NVLink-domain positions: the one place that writes and reads `<cluster>-<i>` (a node)
//! and `<cluster>-nvl<k>` (an NVLink domain's piece), and that says which domain a node index is in.
//!
//! Every cloud names its nodes this way, and finds its own nodes among whatever else is in an account by
//! reading the names back, so writing and reading must agree exactly: a name is read only if it is the
//! one [`node_name`] writes (no sign, no leading zero, nothing after the digits). PURE: names in, names out;
//! this module knows no cloud and imports nothing of the crate (`tests/invariants.rs` keeps node names
//! out of every other file).

use std::ops::Range;

/// The name of node `index` of `cluster`: `train-3`.
pub fn node_name(cluster: &str, index: u32) -> String {
    format!("{cluster}-{index}")
}

/// The names of a cluster of `count` nodes, in index order: `train-0`, `train-1`, ...
pub fn node_names(cluster: &str, count: u32) -> Vec<String> {
    (0..count).map(|i| node_name(cluster, i)).collect()
}

/// The index of the node `name` of `cluster`: `Some(3)` for `train-3`, `None` for any name [`node_name`]
/// does not write for this cluster (`train-+3`, `train-03`, `train-gpu-3`, `train-3-a`, `trains-3`).
pub fn node_index(cluster: &str, name: &str) -> Option<u32> {
    number(name.strip_prefix(cluster)?.strip_prefix('-')?)
}

/// A key that sorts a cluster's nodes by index, with names that are not its nodes' last.
pub fn order(cluster: &str, name: &str) -> u32 {
    node_index(cluster, name).unwrap_or(u32::MAX)
}

/// The nodes of `cluster` at consecutive `indices`, written compactly: `train-18 .. train-35`.
pub fn node_range(cluster: &str, indices: &[u32]) -> String {
    match indices {
        [] => String::from("(none)"),
        [one] => node_name(cluster, *one),
        [first, .., last] => format!("{} .. {}", node_name(cluster, *first), node_name(cluster, *last)),
    }
}

/// The nodes of `cluster` at consecutive `indices` as a Slurm host list: `train-[0-17]`.
pub fn hostlist(cluster: &str, indices: &[u32]) -> String {
    match indices {
        [] => String::new(),
        [one] => node_name(cluster, *one),
        [first, .., last] => format!("{cluster}-[{first}-{last}]"),
    }
}

/// The first `count` nodes of `cluster`, written compactly: `train-0 .. train-3`.
pub fn first_nodes_range(cluster: &str, count: u32) -> String {
    node_range(cluster, &(0..count).collect::<Vec<_>>())
}

/// Whether `names` are exactly the first nodes of `cluster`, in order and without gaps.
pub fn are_first_nodes(cluster: &str, names: &[String]) -> bool {
    names.iter().enumerate().all(|(i, n)| u32::try_from(i).is_ok_and(|i| node_index(cluster, n) == Some(i)))
}

/// The nodes at `indices` of `cluster` written for a piece's `names` setting: compactly when they are the
/// whole of `domain` (of `per_domain` nodes), else listed.
pub fn domain_names_setting(cluster: &str, domain: u32, per_domain: u32, indices: &[u32]) -> String {
    if indices.iter().copied().eq(whole_domain(domain, per_domain)) {
        node_range(cluster, indices)
    } else {
        indices.iter().map(|i| node_name(cluster, *i)).collect::<Vec<_>>().join(", ")
    }
}

/// The name of NVLink domain `domain` of `cluster`, which its per-domain pieces take: `train-nvl0`.
pub fn domain_name(cluster: &str, domain: u32) -> String {
    format!("{cluster}-nvl{domain}")
}

/// The domain index of a piece named `<cluster>-nvl<k>` (as [`domain_name`] writes it), else `None`.
pub fn domain_index(cluster: &str, name: &str) -> Option<u32> {
    number(name.strip_prefix(cluster)?.strip_prefix("-nvl")?)
}

/// The NVLink domain node `node` is in, when each domain holds `per_domain` consecutive nodes.
pub fn domain_of(node: u32, per_domain: u32) -> u32 {
    node / per_domain.max(1)
}

/// How many domains `node_count` nodes fill (the last one may be partly filled).
pub fn domain_count(node_count: u32, per_domain: u32) -> u32 {
    node_count.div_ceil(per_domain.max(1))
}

/// The node indices a full domain `domain` holds: `18..36` for domain 1 of 18 nodes.
pub fn whole_domain(domain: u32, per_domain: u32) -> Range<u32> {
    let per = per_domain.max(1);
    let first = domain.saturating_mul(per);
    first..first.saturating_add(per)
}

/// The node indices of domain `domain` in a cluster of `node_count` nodes.
pub fn domain_nodes(domain: u32, per_domain: u32, node_count: u32) -> Range<u32> {
    let whole = whole_domain(domain, per_domain);
    whole.start.min(node_count)..whole.end.min(node_count)
}

/// The sorted, distinct indices of the nodes among `names` that are in `domain`.
pub fn nodes_in_domain<'a>(cluster: &str, names: impl IntoIterator<Item = &'a str>, domain: u32, per_domain: u32) -> Vec<u32> {
    let mut out: Vec<u32> =
        names.into_iter().filter_map(|n| node_index(cluster, n)).filter(|i| domain_of(*i, per_domain) == domain).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Node names as a Slurm host list: names that differ only in their trailing number folded into one
/// bracketed range list (`train-[0-3,5]`), in the order of first appearance, others as they are, joined
/// by commas. Any names (a cluster's, or a VM's own like `et-0_2`), not only [`node_name`]'s.
pub fn compress(names: &[String]) -> String {
    let mut groups: Vec<(String, Vec<(u64, usize)>)> = Vec::new();
    let mut plain: Vec<(usize, String)> = Vec::new();
    for (at, name) in names.iter().enumerate() {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, number) = name.split_at(name.len() - digits);
        // A number with a leading zero (`n01`) is written as it is: a range would drop the zero.
        match number.parse::<u64>() {
            Ok(n) if !number.is_empty() && (number == "0" || !number.starts_with('0')) => {
                match groups.iter_mut().find(|(p, _)| p == prefix) {
                    Some((_, ns)) => ns.push((n, at)),
                    None => groups.push((prefix.to_owned(), vec![(n, at)])),
                }
            }
            _ => plain.push((at, name.clone())),
        }
    }
    let mut parts: Vec<(usize, String)> = plain;
    for (prefix, mut numbers) in groups {
        let first = numbers.iter().map(|(_, at)| *at).min().unwrap_or(0);
        numbers.sort_unstable();
        numbers.dedup_by_key(|(n, _)| *n);
        if let [(n, _)] = numbers[..] {
            parts.push((first, format!("{prefix}{n}")));
            continue;
        }
        let mut ranges: Vec<String> = Vec::new();
        let mut i = 0;
        while i < numbers.len() {
            let mut j = i;
            while j + 1 < numbers.len() && numbers[j + 1].0 == numbers[j].0 + 1 {
                j += 1;
            }
            ranges.push(if i == j { numbers[i].0.to_string() } else { format!("{}-{}", numbers[i].0, numbers[j].0) });
            i = j + 1;
        }
        parts.push((first, format!("{prefix}[{}]", ranges.join(","))));
    }
    parts.sort_by_key(|(at, _)| *at);
    parts.into_iter().map(|(_, p)| p).collect::<Vec<_>>().join(",")
}

/// A Slurm cluster's host name of controller `i` (0: the primary, 1: the backup).
pub fn controller_name(cluster: &str, i: u32) -> String {
    if i == 0 { format!("{cluster}-controller") } else { format!("{cluster}-backup") }
}

/// The host name of login node `i`.
pub fn login_name(cluster: &str, i: u32) -> String {
    format!("{cluster}-login{i}")
}

/// A node's name as a shell word, its index the shell arithmetic `index` (`$(( 100 + 3 ))`): what a node
/// that learns its index at boot writes, as [`node_name`] would.
pub fn node_name_in_shell(cluster: &str, index: &str) -> String {
    format!("{cluster}-{index}")
}

/// A decimal number exactly as `{}` writes a `u32`: digits only, no sign, no leading zero.
fn number(digits: &str) -> Option<u32> {
    let canonical = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_fold_into_a_slurm_host_list() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(super::compress(&names(&["h-0", "h-1", "h-2", "h-3"])), "h-[0-3]");
        assert_eq!(super::compress(&names(&["h-0", "h-1", "h-3", "g-7", "h-2", "h-9"])), "h-[0-3,9],g-7");
        assert_eq!(super::compress(&names(&["et-0", "et-1", "et-0_2"])), "et-[0-1],et-0_2");
        assert_eq!(super::compress(&names(&["ctl", "n01", "n02"])), "ctl,n01,n02");
        assert_eq!(super::compress(&[]), "");
    }

    use super::*;

    #[test]
    fn node_names_read_back_as_their_index() {
        for i in [0, 1, 9, 10, 17, 18, 1000, u32::MAX] {
            assert_eq!(node_index("train", &node_name("train", i)), Some(i));
        }
        assert_eq!(node_names("gb", 3), ["gb-0", "gb-1", "gb-2"]);
        assert_eq!(node_index("lib-a", "lib-a-3"), Some(3), "a cluster name with a hyphen: the index is after the whole name");
    }

    /// The readers this module replaced disagreed on these: `str::parse::<u32>` takes a leading `+` and
    /// leading zeros, the domain readers took digits only. A node is read only as `node_name` writes it.
    #[test]
    fn only_the_names_node_name_writes_are_read() {
        for other in [
            "train",
            "train-",
            "train-+3",
            "train--3",
            "train-03",
            "train-00",
            "train-3a",
            "train-3-4",
            "train-gpu-3",
            "train-nvl0",
            "trains-3",
            "xtrain-3",
            "train_3",
            "train- 3",
            "train-4294967296",
        ] {
            assert_eq!(node_index("train", other), None, "{other}");
        }
        assert_eq!(node_index("train-gpu", "train-gpu-3"), Some(3), "the node of the longer cluster is that cluster's");
        assert_eq!(order("train", "train-2"), 2);
        assert_eq!(order("train", "train-+2"), u32::MAX, "names that are not the cluster's nodes sort last");
    }

    #[test]
    fn domain_pieces_are_named_after_the_cluster() {
        assert_eq!(domain_name("train", 12), "train-nvl12");
        assert_eq!(domain_index("train", "train-nvl0"), Some(0));
        assert_eq!(domain_index("train", "train-nvl12"), Some(12));
        assert_eq!(domain_index("a-b", "a-b-nvl1"), Some(1));
        for other in ["train", "train-nvl", "train-nvlx", "train-0", "trains-nvl1", "train-nvl1-2", "train-nvl+1", "train-nvl01", "gb-nvl0"]
        {
            assert_eq!(domain_index("train", other), None, "{other}");
        }
    }

    #[test]
    fn domains_hold_consecutive_nodes() {
        assert_eq!((domain_of(0, 18), domain_of(17, 18), domain_of(18, 18), domain_of(53, 18)), (0, 0, 1, 2));
        assert_eq!(domain_of(5, 0), 5, "a domain of no nodes is read as one node each");
        assert_eq!((domain_count(36, 18), domain_count(37, 18), domain_count(0, 18)), (2, 3, 0));
        assert_eq!(whole_domain(1, 18), 18..36);
        assert_eq!(domain_nodes(1, 18, 40), 18..36);
        assert_eq!(domain_nodes(2, 18, 40), 36..40, "the last domain holds what is left");
        assert_eq!(domain_nodes(3, 18, 40), 40..40);
        let names = ["gb-19", "gb-18", "gb-3", "gb-18", "gb-x", "other-20"];
        assert_eq!(nodes_in_domain("gb", names, 1, 18), [18, 19]);
    }

    #[test]
    fn ranges_are_compact_only_for_whole_runs() {
        assert_eq!(node_range("gb", &[]), "(none)");
        assert_eq!(node_range("gb", &[4]), "gb-4");
        assert_eq!(node_range("gb", &[18, 19, 20]), "gb-18 .. gb-20");
        assert_eq!(first_nodes_range("n", 3), "n-0 .. n-2");
        assert_eq!((hostlist("t", &[]), hostlist("t", &[5]), hostlist("t", &[0, 1, 2])), (String::new(), "t-5".into(), "t-[0-2]".into()));
        assert_eq!(first_nodes_range("n", 1), "n-0");
        assert!(are_first_nodes("n", &node_names("n", 3)) && are_first_nodes("n", &[]));
        assert!(!are_first_nodes("n", &["n-0".into(), "n-2".into()]) && !are_first_nodes("n", &["n-00".into()]));
        let whole: Vec<u32> = (18..36).collect();
        assert_eq!(domain_names_setting("gb", 1, 18, &whole), "gb-18 .. gb-35");
        assert_eq!(domain_names_setting("gb", 1, 18, &[18, 20]), "gb-18, gb-20");
        assert_eq!(domain_names_setting("gb", 1, 18, &[]), "");
    }
}
