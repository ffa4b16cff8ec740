//! The nftables backend: one table of the agent's own per fault (`inet bloodraven_chaos_<id>`),
//! replaced as a whole when applied and deleted as a whole when healed, so removing it removes
//! exactly what the agent added. The pure half renders the ruleset and parses `nft list`.

use super::Peer;

/// The prefix of the agent's tables.
pub const TABLE_PREFIX: &str = "bloodraven_chaos_";

/// The table of fault `id`.
pub fn table_name(id: u64) -> String {
    format!("{TABLE_PREFIX}{id}")
}

/// The hooks' priority: `raw`, before connection tracking, so established connections are
/// cut as well as new ones.
const PRIORITY: i32 = -300;

/// The `nft -f -` script: create-then-delete makes it idempotent, and the whole file is one
/// transaction.
pub fn render(table: &str, peers: &[Peer]) -> String {
    let rules = |direction: &str| -> String {
        peers
            .iter()
            .map(|peer| {
                format!(
                    "\t\t{} {direction} {} counter drop\n",
                    peer.nft_family(),
                    peer
                )
            })
            .collect()
    };
    format!(
        "table inet {table}\n\
         delete table inet {table}\n\
         table inet {table} {{\n\
         \tchain input {{\n\
         \t\ttype filter hook input priority {PRIORITY}; policy accept;\n\
         {}\
         \t}}\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority {PRIORITY}; policy accept;\n\
         {}\
         \t}}\n\
         }}\n",
        rules("saddr"),
        rules("daddr")
    )
}

/// A drop rule as `nft list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRule {
    /// `saddr` or `daddr`.
    pub direction: String,
    /// The address or CIDR, canonical.
    pub peer: Peer,
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
    /// Its drop rules; other rules are ignored.
    pub drops: Vec<ListedRule>,
}

/// Parses `nft list table inet <name>`: the chains, their hooks and drop rules.
pub fn parse_listing(text: &str) -> Vec<ListedChain> {
    let mut chains: Vec<ListedChain> = Vec::new();
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["chain", name, "{"] => chains.push(ListedChain {
                name: (*name).to_owned(),
                ..ListedChain::default()
            }),
            ["type", _, "hook", hook, ..] => {
                if let Some(chain) = chains.last_mut() {
                    chain.hook = Some(hook.trim_end_matches(';').to_owned());
                }
            }
            [family @ ("ip" | "ip6"), direction @ ("saddr" | "daddr"), address, rest @ ..]
                if rest.last() == Some(&"drop") =>
            {
                let Ok(peer) = Peer::parse(address) else {
                    continue;
                };
                if peer.nft_family() != *family {
                    continue;
                }
                let packets = rest
                    .windows(2)
                    .find(|pair| pair[0] == "packets")
                    .and_then(|pair| pair[1].parse().ok());
                if let Some(chain) = chains.last_mut() {
                    chain.drops.push(ListedRule {
                        direction: (*direction).to_owned(),
                        peer,
                        packets,
                    });
                }
            }
            _ => {}
        }
    }
    chains
}

/// What is missing from a listing for the table to cut `peers` both ways ("" when nothing).
pub fn missing(chains: &[ListedChain], peers: &[Peer]) -> Vec<String> {
    let mut missing = Vec::new();
    for (hook, direction) in [("input", "saddr"), ("output", "daddr")] {
        let Some(chain) = chains.iter().find(|c| c.hook.as_deref() == Some(hook)) else {
            missing.push(format!("no chain on the {hook} hook"));
            continue;
        };
        for peer in peers {
            if !chain
                .drops
                .iter()
                .any(|rule| rule.direction == direction && rule.peer == *peer)
            {
                missing.push(format!("no {hook} rule dropping {direction} {peer}"));
            }
        }
    }
    missing
}

/// Packets dropped so far, by all the listed drop rules.
pub fn packets_dropped(chains: &[ListedChain]) -> u64 {
    chains
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
             \tchain input {\n\
             \t\ttype filter hook input priority -300; policy accept;\n\
             \t\tip saddr 10.244.1.7 counter drop\n\
             \t\tip saddr 10.96.0.0/16 counter drop\n\
             \t\tip6 saddr fd00::/64 counter drop\n\
             \t}\n\
             \tchain output {\n\
             \t\ttype filter hook output priority -300; policy accept;\n\
             \t\tip daddr 10.244.1.7 counter drop\n\
             \t\tip daddr 10.96.0.0/16 counter drop\n\
             \t\tip6 daddr fd00::/64 counter drop\n\
             \t}\n\
             }\n"
        );
    }

    // What nft 1.0.6 prints back for the rendered table (priority -300 shown as `raw`).
    const LISTING: &str = "table inet bloodraven_chaos_7 {\n\
        \tchain input {\n\
        \t\ttype filter hook input priority raw; policy accept;\n\
        \t\tip saddr 10.244.1.7 counter packets 3 bytes 252 drop\n\
        \t\tip saddr 10.96.0.0/16 counter packets 0 bytes 0 drop\n\
        \t}\n\
        \tchain output {\n\
        \t\ttype filter hook output priority raw; policy accept;\n\
        \t\tip daddr 10.244.1.7 counter packets 2 bytes 168 drop\n\
        \t\tip daddr 10.96.0.0/16 counter packets 0 bytes 0 drop\n\
        \t}\n\
        }\n";

    #[test]
    fn a_listing_is_parsed_and_checked_against_the_peers() {
        let chains = parse_listing(LISTING);
        assert_eq!(chains.len(), 2);
        assert_eq!(chains[0].hook.as_deref(), Some("input"));
        assert_eq!(chains[1].drops[0].direction, "daddr");
        assert_eq!(chains[1].drops[0].packets, Some(2));
        assert_eq!(packets_dropped(&chains), 5);
        assert!(missing(&chains, &peers(&["10.244.1.7", "10.96.0.0/16"])).is_empty());
        assert_eq!(
            missing(&chains, &peers(&["10.244.1.8"])),
            vec![
                "no input rule dropping saddr 10.244.1.8",
                "no output rule dropping daddr 10.244.1.8"
            ]
        );
        let input_only: String = LISTING.lines().take(5).collect::<Vec<_>>().join("\n");
        assert_eq!(
            missing(&parse_listing(&input_only), &peers(&["10.244.1.7"])),
            vec!["no chain on the output hook"]
        );
        assert!(parse_listing("").is_empty());
        assert!(parse_listing("garbage { ip saddr x drop").is_empty());
    }

    #[test]
    fn tables_are_listed_by_name() {
        let text = "table inet bloodraven_chaos_7\ntable ip nat\ntable inet filter\n";
        assert_eq!(parse_tables(text), vec!["bloodraven_chaos_7", "filter"]);
    }
}
