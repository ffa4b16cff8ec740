//! The nftables backend: one table of the agent's own per fault (`inet bloodraven_chaos_<id>`)
//! in each network namespace the fault cuts. Its peers are the elements of two named interval
//! sets, `peers4` and `peers6`, which the input and output chains' drop rules look up; a change
//! of peers (a peer pod that came back under another IP) rewrites both sets in one transaction,
//! so the rules never stand with a gap, and their counters are kept. The table is created as a
//! whole when applied and deleted as a whole when healed, so removing it removes exactly what
//! the agent added. The pure half renders the scripts and parses `nft list`.

use super::Peer;

/// The prefix of the agent's tables.
pub const TABLE_PREFIX: &str = "bloodraven_chaos_";

/// The table of fault `id`.
pub fn table_name(id: u64) -> String {
    format!("{TABLE_PREFIX}{id}")
}

/// The set of IPv4 peers.
pub const SET_IPV4: &str = "peers4";
/// The set of IPv6 peers.
pub const SET_IPV6: &str = "peers6";

/// The hooks' priority: `raw`, before connection tracking, so established connections are
/// cut as well as new ones.
const PRIORITY: i32 = -300;

/// The set holding peers of that family.
fn set_of(ipv6: bool) -> &'static str {
    if ipv6 {
        SET_IPV6
    } else {
        SET_IPV4
    }
}

/// The peers of one family, as nft elements (`10.244.1.7, 10.96.0.0/16`); `None` when none.
fn elements(peers: &[Peer], ipv6: bool) -> Option<String> {
    let listed: Vec<String> = peers
        .iter()
        .filter(|peer| peer.is_ipv6() == ipv6)
        .map(Peer::to_string)
        .collect();
    (!listed.is_empty()).then(|| listed.join(", "))
}

/// The `nft -f -` script that creates the table with `peers` (reduced: no peer covering
/// another, see [`super::reduce_peers`]): create-then-delete makes it idempotent, and the
/// whole file is one transaction.
pub fn render(table: &str, peers: &[Peer]) -> String {
    let set = |ipv6: bool| -> String {
        let kind = if ipv6 { "ipv6_addr" } else { "ipv4_addr" };
        let listed = elements(peers, ipv6)
            .map(|listed| format!("\t\telements = {{ {listed} }}\n"))
            .unwrap_or_default();
        format!(
            "\tset {} {{\n\t\ttype {kind}\n\t\tflags interval\n{listed}\t}}\n",
            set_of(ipv6)
        )
    };
    let rules = |direction: &str| -> String {
        format!(
            "\t\tip {direction} @{SET_IPV4} counter drop\n\t\tip6 {direction} @{SET_IPV6} counter drop\n"
        )
    };
    format!(
        "table inet {table}\n\
         delete table inet {table}\n\
         table inet {table} {{\n\
         {}\
         {}\
         \tchain input {{\n\
         \t\ttype filter hook input priority {PRIORITY}; policy accept;\n\
         {}\
         \t}}\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority {PRIORITY}; policy accept;\n\
         {}\
         \t}}\n\
         }}\n",
        set(false),
        set(true),
        rules("saddr"),
        rules("daddr")
    )
}

/// The `nft -f -` script that makes both sets of an existing table hold exactly `peers`
/// (reduced): each set is flushed and filled again in the same transaction, so a packet sees
/// either the old peers or the new ones, and a failure leaves the old ones.
pub fn render_update(table: &str, peers: &[Peer]) -> String {
    let mut script = String::new();
    for ipv6 in [false, true] {
        let set = set_of(ipv6);
        script.push_str(&format!("flush set inet {table} {set}\n"));
        if let Some(listed) = elements(peers, ipv6) {
            script.push_str(&format!("add element inet {table} {set} {{ {listed} }}\n"));
        }
    }
    script
}

/// A drop rule as `nft list` shows it: `ip saddr @peers4 counter packets 3 bytes 252 drop`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRule {
    /// `ip` or `ip6`.
    pub family: String,
    /// `saddr` or `daddr`.
    pub direction: String,
    /// The set it looks up (without `@`).
    pub set: String,
    /// Its counter's packets, when it has one.
    pub packets: Option<u64>,
}

/// A chain as `nft list` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedChain {
    /// Its name.
    pub name: String,
    /// Its hook (`input`, `output`), if it is a base chain.
    pub hook: Option<String>,
    /// Its drop rules that look up a set; other rules are ignored.
    pub drops: Vec<ListedRule>,
}

/// A set as `nft list` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedSet {
    /// Its name.
    pub name: String,
    /// Its elements as printed (`10.96.0.0/16`, `10.244.1.7`; a merged range would show as
    /// `a-b`).
    pub elements: Vec<String>,
}

/// A table as `nft list table` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Its chains.
    pub chains: Vec<ListedChain>,
    /// Its sets.
    pub sets: Vec<ListedSet>,
}

enum Block {
    None,
    Chain,
    Set,
    Elements,
}

/// Adds the elements on `text` (up to a `}`) to the last set; whether the `}` was there.
fn push_elements(listing: &mut Listing, text: &str) -> bool {
    let (inside, closed) = match text.split_once('}') {
        Some((inside, _)) => (inside, true),
        None => (text, false),
    };
    if let Some(set) = listing.sets.last_mut() {
        set.elements.extend(
            inside
                .split([',', ' ', '\t'])
                .filter(|word| !word.is_empty())
                .map(str::to_owned),
        );
    }
    closed
}

/// Parses `nft list table inet <name>`: the sets and their elements (which may run over
/// several lines), the chains, their hooks and drop rules.
pub fn parse_listing(text: &str) -> Listing {
    let mut listing = Listing::default();
    let mut block = Block::None;
    for line in text.lines().map(str::trim) {
        if let Block::Elements = block {
            if push_elements(&mut listing, line) {
                block = Block::Set;
            }
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match (&block, words.as_slice()) {
            (_, ["chain", name, "{"]) => {
                listing.chains.push(ListedChain {
                    name: (*name).to_owned(),
                    ..ListedChain::default()
                });
                block = Block::Chain;
            }
            (_, ["set", name, "{"]) => {
                listing.sets.push(ListedSet {
                    name: (*name).to_owned(),
                    ..ListedSet::default()
                });
                block = Block::Set;
            }
            (_, ["}"]) => block = Block::None,
            (Block::Set, ["elements", "=", ..]) => {
                let rest = line.split_once('{').map_or("", |(_, rest)| rest);
                block = if push_elements(&mut listing, rest) {
                    Block::Set
                } else {
                    Block::Elements
                };
            }
            (Block::Chain, ["type", _, "hook", hook, ..]) => {
                if let Some(chain) = listing.chains.last_mut() {
                    chain.hook = Some(hook.trim_end_matches(';').to_owned());
                }
            }
            (
                Block::Chain,
                [family @ ("ip" | "ip6"), direction @ ("saddr" | "daddr"), set, rest @ ..],
            ) if rest.last() == Some(&"drop") && set.starts_with('@') => {
                let packets = rest
                    .windows(2)
                    .find(|pair| pair[0] == "packets")
                    .and_then(|pair| pair[1].parse().ok());
                if let Some(chain) = listing.chains.last_mut() {
                    chain.drops.push(ListedRule {
                        family: (*family).to_owned(),
                        direction: (*direction).to_owned(),
                        set: set.trim_start_matches('@').to_owned(),
                        packets,
                    });
                }
            }
            _ => {}
        }
    }
    listing
}

/// What keeps a listing from cutting exactly `peers` (reduced) both ways (empty when
/// nothing): a hook without its chain or drop rules, a peer missing from its set, or an
/// element still in a set that is no longer a peer (an address a peer pod left).
pub fn missing(listing: &Listing, peers: &[Peer]) -> Vec<String> {
    let mut missing = Vec::new();
    for (hook, direction) in [("input", "saddr"), ("output", "daddr")] {
        let Some(chain) = listing
            .chains
            .iter()
            .find(|c| c.hook.as_deref() == Some(hook))
        else {
            missing.push(format!("no chain on the {hook} hook"));
            continue;
        };
        for (family, set) in [("ip", SET_IPV4), ("ip6", SET_IPV6)] {
            if !chain
                .drops
                .iter()
                .any(|rule| rule.family == family && rule.direction == direction && rule.set == set)
            {
                missing.push(format!(
                    "no {hook} rule dropping {family} {direction} @{set}"
                ));
            }
        }
    }
    for ipv6 in [false, true] {
        let name = set_of(ipv6);
        let Some(set) = listing.sets.iter().find(|s| s.name == name) else {
            missing.push(format!("no set {name}"));
            continue;
        };
        let listed: Vec<Option<Peer>> = set
            .elements
            .iter()
            .map(|element| Peer::parse(element).ok())
            .collect();
        for peer in peers.iter().filter(|peer| peer.is_ipv6() == ipv6) {
            if !listed.contains(&Some(*peer)) {
                missing.push(format!("set {name} lacks {peer}"));
            }
        }
        for (element, parsed) in set.elements.iter().zip(&listed) {
            if !parsed.is_some_and(|parsed| peers.contains(&parsed)) {
                missing.push(format!("set {name} still holds {element}, not a peer"));
            }
        }
    }
    missing
}

/// Packets dropped so far, by all the listed drop rules.
pub fn packets_dropped(listing: &Listing) -> u64 {
    listing
        .chains
        .iter()
        .flat_map(|chain| &chain.drops)
        .filter_map(|rule| rule.packets)
        .sum()
}

/// The `inet` tables of `nft list tables` (`table inet <name>` lines).
pub fn parse_tables(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["table", "inet", name] => Some(name.to_owned()),
                _ => None,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(list: &[&str]) -> Vec<Peer> {
        list.iter().map(|p| Peer::parse(p).unwrap()).collect()
    }

    // A partition cuts both directions, established connections included, and lives in a
    // table of the agent's own (docs/design/style.md rule 14: a fault owns its rules, replaced
    // and removed as a whole).
    #[test]
    fn the_ruleset_drops_each_peer_both_ways_in_its_own_table() {
        let text = render(
            &table_name(7),
            &peers(&["10.244.1.7", "10.96.0.0/16", "fd00::/64"]),
        );
        assert_eq!(
            text,
            "table inet bloodraven_chaos_7\n\
             delete table inet bloodraven_chaos_7\n\
             table inet bloodraven_chaos_7 {\n\
             \tset peers4 {\n\
             \t\ttype ipv4_addr\n\
             \t\tflags interval\n\
             \t\telements = { 10.244.1.7, 10.96.0.0/16 }\n\
             \t}\n\
             \tset peers6 {\n\
             \t\ttype ipv6_addr\n\
             \t\tflags interval\n\
             \t\telements = { fd00::/64 }\n\
             \t}\n\
             \tchain input {\n\
             \t\ttype filter hook input priority -300; policy accept;\n\
             \t\tip saddr @peers4 counter drop\n\
             \t\tip6 saddr @peers6 counter drop\n\
             \t}\n\
             \tchain output {\n\
             \t\ttype filter hook output priority -300; policy accept;\n\
             \t\tip daddr @peers4 counter drop\n\
             \t\tip6 daddr @peers6 counter drop\n\
             \t}\n\
             }\n"
        );
        // A family without peers gets an empty set (nft refuses `elements = { }`).
        assert!(render("t", &peers(&["10.0.0.1"]))
            .contains("\tset peers6 {\n\t\ttype ipv6_addr\n\t\tflags interval\n\t}\n"));
    }

    // A peer pod that came back under another IP: both sets are rewritten in one transaction
    // (the old address out, the new one in), the chains and their counters untouched.
    #[test]
    fn a_change_of_peers_rewrites_the_sets_in_one_script() {
        assert_eq!(
            render_update(&table_name(7), &peers(&["10.96.0.0/16", "10.244.2.9"])),
            "flush set inet bloodraven_chaos_7 peers4\n\
             add element inet bloodraven_chaos_7 peers4 { 10.96.0.0/16, 10.244.2.9 }\n\
             flush set inet bloodraven_chaos_7 peers6\n"
        );
        assert_eq!(
            render_update("t", &peers(&["fd00::1"])),
            "flush set inet t peers4\nflush set inet t peers6\nadd element inet t peers6 { fd00::1 }\n"
        );
    }

    // What nft 1.0.6 prints back for the rendered table (priority -300 shown as `raw`, the
    // elements sorted and wrapped over two lines).
    const LISTING: &str = "table inet bloodraven_chaos_7 {\n\
        \tset peers4 {\n\
        \t\ttype ipv4_addr\n\
        \t\tflags interval\n\
        \t\telements = { 10.96.0.0/16, 10.244.1.7,\n\
        \t\t\t     10.244.1.8 }\n\
        \t}\n\
        \n\
        \tset peers6 {\n\
        \t\ttype ipv6_addr\n\
        \t\tflags interval\n\
        \t}\n\
        \n\
        \tchain input {\n\
        \t\ttype filter hook input priority raw; policy accept;\n\
        \t\tip saddr @peers4 counter packets 3 bytes 252 drop\n\
        \t\tip6 saddr @peers6 counter packets 0 bytes 0 drop\n\
        \t}\n\
        \n\
        \tchain output {\n\
        \t\ttype filter hook output priority raw; policy accept;\n\
        \t\tip daddr @peers4 counter packets 2 bytes 168 drop\n\
        \t\tip6 daddr @peers6 counter packets 0 bytes 0 drop\n\
        \t}\n\
        }\n";

    #[test]
    fn a_listing_is_parsed_and_checked_against_the_peers() {
        let listing = parse_listing(LISTING);
        assert_eq!(listing.chains.len(), 2);
        assert_eq!(listing.chains[0].hook.as_deref(), Some("input"));
        assert_eq!(listing.chains[1].drops[0].direction, "daddr");
        assert_eq!(listing.chains[1].drops[0].set, "peers4");
        assert_eq!(listing.chains[1].drops[0].packets, Some(2));
        assert_eq!(
            listing.sets[0].elements,
            vec!["10.96.0.0/16", "10.244.1.7", "10.244.1.8"]
        );
        assert!(listing.sets[1].elements.is_empty());
        assert_eq!(packets_dropped(&listing), 5);
        assert!(missing(
            &listing,
            &peers(&["10.244.1.7", "10.244.1.8", "10.96.0.0/16"])
        )
        .is_empty());
        // A peer that moved from .8 to .9: the new address is missing, the old one still held.
        assert_eq!(
            missing(
                &listing,
                &peers(&["10.244.1.7", "10.244.1.9", "10.96.0.0/16"])
            ),
            vec![
                "set peers4 lacks 10.244.1.9",
                "set peers4 still holds 10.244.1.8, not a peer"
            ]
        );
        let input_only: String = LISTING.lines().take(18).collect::<Vec<_>>().join("\n");
        assert_eq!(
            missing(
                &parse_listing(&input_only),
                &peers(&["10.244.1.7", "10.244.1.8", "10.96.0.0/16"])
            ),
            vec!["no chain on the output hook"]
        );
        let no_ipv6_rule =
            LISTING.replace("\t\tip6 saddr @peers6 counter packets 0 bytes 0 drop\n", "");
        assert_eq!(
            missing(
                &parse_listing(&no_ipv6_rule),
                &peers(&["10.244.1.7", "10.244.1.8", "10.96.0.0/16"])
            ),
            vec!["no input rule dropping ip6 saddr @peers6"]
        );
        let one_line = "table inet t {\n\tset peers4 {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1 }\n\t}\n}\n";
        assert_eq!(parse_listing(one_line).sets[0].elements, vec!["10.0.0.1"]);
        assert!(missing(&parse_listing(one_line), &peers(&["10.0.0.1"]))
            .contains(&"no set peers6".to_owned()));
        assert_eq!(parse_listing(""), Listing::default());
        assert!(parse_listing("garbage { ip saddr x drop").chains.is_empty());
    }

    #[test]
    fn tables_are_listed_by_name() {
        let text = "table inet bloodraven_chaos_7\ntable ip nat\ntable inet filter\n";
        assert_eq!(parse_tables(text), vec!["bloodraven_chaos_7", "filter"]);
    }
}
