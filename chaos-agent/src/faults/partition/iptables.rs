//! The iptables backend, for an agent image without `nft`: a chain of the agent's own per
//! fault (`BR-CHAOS-<id>`, in the filter table) holding the drop rules, jumped to first from
//! INPUT and OUTPUT; healing removes the two jumps and the chain. IPv4 peers go through
//! `iptables`, IPv6 peers through `ip6tables`. A change of peers is made rule by rule against
//! what `iptables -S` lists: the new peers' drops appended first, then the old ones deleted,
//! so no peer is let through in between.

use super::Peer;

/// The chain of fault `id` (iptables chain names are at most 28 characters).
pub fn chain_name(id: u64) -> String {
    format!("BR-CHAOS-{id}")
}

/// The tool for `peers`' family.
pub fn program(ipv6: bool) -> &'static str {
    if ipv6 {
        "ip6tables"
    } else {
        "iptables"
    }
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// The commands (arguments to one tool) that install the chain for `peers` (all of one
/// family): create it, add the drops, jump to it first from INPUT and OUTPUT.
pub fn apply_commands(chain: &str, peers: &[Peer]) -> Vec<Vec<String>> {
    let mut commands = vec![args(&["-w", "-N", chain])];
    for peer in peers {
        let peer = peer.to_string();
        commands.push(args(&["-w", "-A", chain, "-s", &peer, "-j", "DROP"]));
        commands.push(args(&["-w", "-A", chain, "-d", &peer, "-j", "DROP"]));
    }
    commands.push(args(&["-w", "-I", "INPUT", "1", "-j", chain]));
    commands.push(args(&["-w", "-I", "OUTPUT", "1", "-j", chain]));
    commands
}

/// The commands that remove it (each may fail when that part is gone already).
pub fn heal_commands(chain: &str) -> Vec<Vec<String>> {
    vec![
        args(&["-w", "-D", "INPUT", "-j", chain]),
        args(&["-w", "-D", "OUTPUT", "-j", chain]),
        args(&["-w", "-F", chain]),
        args(&["-w", "-X", chain]),
    ]
}

/// What `iptables -S` (the whole filter table) lacks for the chain to cut `peers` both ways.
pub fn missing(listing: &str, chain: &str, peers: &[Peer]) -> Vec<String> {
    let rules: Vec<Vec<&str>> = listing
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    let has = |wanted: &[&str]| rules.iter().any(|rule| rule.as_slice() == wanted);
    let mut missing = Vec::new();
    for hook in ["INPUT", "OUTPUT"] {
        if !has(&["-A", hook, "-j", chain]) {
            missing.push(format!("no jump from {hook} to {chain}"));
        }
    }
    for peer in peers {
        // iptables -S shows a host as /32 (/128).
        let shown = peer.with_prefix();
        for flag in ["-s", "-d"] {
            if !has(&["-A", chain, flag, &shown, "-j", "DROP"]) {
                missing.push(format!("no rule {flag} {shown} -j DROP in {chain}"));
            }
        }
    }
    missing
}

/// The drops of `chain` in `iptables -S`: (flag `-s`/`-d`, peer), in listing order.
pub fn listed_drops(listing: &str, chain: &str) -> Vec<(String, Peer)> {
    listing
        .lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["-A", name, flag @ ("-s" | "-d"), peer, "-j", "DROP"] if name == chain => {
                    Some((flag.to_owned(), Peer::parse(peer).ok()?))
                }
                _ => None,
            },
        )
        .collect()
}

/// Whether `iptables -S` lists the chain itself (`-N <chain>`).
pub fn has_chain(listing: &str, chain: &str) -> bool {
    listing
        .lines()
        .any(|line| line.split_whitespace().collect::<Vec<_>>() == ["-N", chain])
}

/// The commands (arguments to one tool) that bring an existing chain from what `listing`
/// shows to dropping exactly `peers` (all of one family): the missing drops appended first,
/// then the drops of addresses that are no longer peers deleted.
pub fn update_commands(listing: &str, chain: &str, peers: &[Peer]) -> Vec<Vec<String>> {
    let listed = listed_drops(listing, chain);
    let mut commands = Vec::new();
    for peer in peers {
        for flag in ["-s", "-d"] {
            if !listed.iter().any(|(f, p)| f == flag && p == peer) {
                let shown = peer.to_string();
                commands.push(args(&["-w", "-A", chain, flag, &shown, "-j", "DROP"]));
            }
        }
    }
    for (flag, peer) in &listed {
        if !peers.contains(peer) {
            let shown = peer.with_prefix();
            commands.push(args(&["-w", "-D", chain, flag, &shown, "-j", "DROP"]));
        }
    }
    commands
}

/// The drops of `chain` in `iptables -S` whose address is not one of `peers`.
pub fn extra(listing: &str, chain: &str, peers: &[Peer]) -> Vec<String> {
    listed_drops(listing, chain)
        .into_iter()
        .filter(|(_, peer)| !peers.contains(peer))
        .map(|(flag, peer)| {
            format!(
                "{chain} still has {flag} {} -j DROP, not a peer",
                peer.with_prefix()
            )
        })
        .collect()
}

/// Whether `iptables -S` still shows the chain or a jump to it.
pub fn still_present(listing: &str, chain: &str) -> bool {
    listing
        .lines()
        .any(|line| line.split_whitespace().any(|word| word == chain))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_is_rendered_jumped_to_and_checked() {
        let peers = vec![
            Peer::parse("10.244.1.7").unwrap(),
            Peer::parse("10.96.0.0/16").unwrap(),
        ];
        let chain = chain_name(7);
        let commands = apply_commands(&chain, &peers);
        let lines: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            lines,
            vec![
                "-w -N BR-CHAOS-7",
                "-w -A BR-CHAOS-7 -s 10.244.1.7 -j DROP",
                "-w -A BR-CHAOS-7 -d 10.244.1.7 -j DROP",
                "-w -A BR-CHAOS-7 -s 10.96.0.0/16 -j DROP",
                "-w -A BR-CHAOS-7 -d 10.96.0.0/16 -j DROP",
                "-w -I INPUT 1 -j BR-CHAOS-7",
                "-w -I OUTPUT 1 -j BR-CHAOS-7",
            ]
        );
        let listing = "-P INPUT ACCEPT\n-P OUTPUT ACCEPT\n-N BR-CHAOS-7\n\
            -A INPUT -j BR-CHAOS-7\n-A OUTPUT -j BR-CHAOS-7\n\
            -A BR-CHAOS-7 -s 10.244.1.7/32 -j DROP\n-A BR-CHAOS-7 -d 10.244.1.7/32 -j DROP\n\
            -A BR-CHAOS-7 -s 10.96.0.0/16 -j DROP\n-A BR-CHAOS-7 -d 10.96.0.0/16 -j DROP\n";
        assert!(missing(listing, &chain, &peers).is_empty());
        assert!(still_present(listing, &chain));
        let without_output = listing.replace("-A OUTPUT -j BR-CHAOS-7\n", "");
        assert_eq!(
            missing(&without_output, &chain, &peers),
            vec!["no jump from OUTPUT to BR-CHAOS-7"]
        );
        assert!(!still_present("-P INPUT ACCEPT\n-N BR-CHAOS-70\n", &chain));
        assert_eq!(
            heal_commands(&chain)
                .iter()
                .map(|c| c.join(" "))
                .collect::<Vec<_>>(),
            vec![
                "-w -D INPUT -j BR-CHAOS-7",
                "-w -D OUTPUT -j BR-CHAOS-7",
                "-w -F BR-CHAOS-7",
                "-w -X BR-CHAOS-7"
            ]
        );
        assert_eq!(program(true), "ip6tables");
    }

    // A peer pod that came back under another IP: its new address's drops are appended, then
    // the old address's deleted; peers already dropped are left alone.
    #[test]
    fn a_change_of_peers_appends_the_new_drops_then_deletes_the_old() {
        let chain = chain_name(7);
        let listing = "-P INPUT ACCEPT\n-N BR-CHAOS-7\n-A INPUT -j BR-CHAOS-7\n\
            -A OUTPUT -j BR-CHAOS-7\n\
            -A BR-CHAOS-7 -s 10.244.1.7/32 -j DROP\n-A BR-CHAOS-7 -d 10.244.1.7/32 -j DROP\n\
            -A BR-CHAOS-7 -s 10.96.0.0/16 -j DROP\n-A BR-CHAOS-7 -d 10.96.0.0/16 -j DROP\n\
            -A BR-CHAOS-70 -s 10.1.1.1/32 -j DROP\n";
        assert!(has_chain(listing, &chain) && !has_chain(listing, "BR-CHAOS-8"));
        assert_eq!(listed_drops(listing, &chain).len(), 4);
        let now = vec![
            Peer::parse("10.96.0.0/16").unwrap(),
            Peer::parse("10.244.2.9").unwrap(),
        ];
        let lines: Vec<String> = update_commands(listing, &chain, &now)
            .iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            lines,
            vec![
                "-w -A BR-CHAOS-7 -s 10.244.2.9 -j DROP",
                "-w -A BR-CHAOS-7 -d 10.244.2.9 -j DROP",
                "-w -D BR-CHAOS-7 -s 10.244.1.7/32 -j DROP",
                "-w -D BR-CHAOS-7 -d 10.244.1.7/32 -j DROP",
            ]
        );
        assert_eq!(
            extra(listing, &chain, &now),
            vec![
                "BR-CHAOS-7 still has -s 10.244.1.7/32 -j DROP, not a peer",
                "BR-CHAOS-7 still has -d 10.244.1.7/32 -j DROP, not a peer"
            ]
        );
        let unchanged = vec![
            Peer::parse("10.244.1.7").unwrap(),
            Peer::parse("10.96.0.0/16").unwrap(),
        ];
        assert!(update_commands(listing, &chain, &unchanged).is_empty());
        assert!(extra(listing, &chain, &unchanged).is_empty());
    }
}
