//! kubectl-bloodraven: `kubectl bloodraven promote|status|revoke-leases|backup|restore|rejoin`.
//!
//! The plugin only writes resources the operator already reads (docs/design/requirements.md
//! R001.12): `promote` sets the `bloodraven.shipstream.io/planned-failover` annotation and
//! returns; `revoke-leases` sets `bloodraven.shipstream.io/revoke-deployment-leases`. It never
//! talks to MySQL and needs a live operator to act on either. `backup` sets
//! `bloodraven.shipstream.io/backup=<name>` (the operator asks the active site's sidecar for
//! it) and `restore --from <backup>` sets `bloodraven.shipstream.io/restore=<backup>` (restore
//! in place of the active site from the backup's logical dump; `--method physical` sets
//! `<backup>,method=physical`: from its `mariadb-backup` copy). `rejoin <site>` sets
//! `bloodraven.shipstream.io/rejoin=<site>` (a fenced returning primary's errant transactions
//! archived, then the site re-seeded from the active one). `status` reads the group.
//!
//! This file is the command tree and its dispatch only; each subcommand is its own module
//! ([`promote`], [`status`], [`revoke_leases`], [`backup`], [`restore`], [`rejoin`]), over
//! the client and the group calls of [`cluster`].

mod backup;
mod cluster;
mod error;
mod promote;
mod rejoin;
mod restore;
mod revoke_leases;
mod status;
#[cfg(test)]
mod test_support;

use kube::Client;

pub use backup::{backup_patch, default_backup_name};
pub use cluster::client;
pub use error::{Error, Result};
pub use promote::{check_promote_target, promote_patch};
pub use rejoin::{check_rejoin_target, rejoin_patch};
pub use restore::restore_patch;
pub use revoke_leases::revoke_patch;
pub use status::format_status;

/// Flags of `kubectl bloodraven`.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "kubectl-bloodraven",
    about = "Bloodraven failover groups: promote, status, revoke-leases, backup, restore, rejoin"
)]
pub struct Cli {
    /// Namespace of the group (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Request a planned failover to SITE (writes the planned-failover annotation and returns).
    Promote {
        /// The MysqlFailoverGroup.
        group: String,
        /// The read-write site to promote.
        site: String,
    },
    /// Show the group's authority, sites and failovers.
    Status {
        /// The MysqlFailoverGroup.
        group: String,
    },
    /// Revoke every deployment lease of the group (writes the revoke annotation).
    RevokeLeases {
        /// The MysqlFailoverGroup.
        group: String,
    },
    /// Take a named backup of the active site on its volume (writes the backup annotation;
    /// the operator asks the site's sidecar; `status` shows it as "Last backup").
    Backup {
        /// The MysqlFailoverGroup.
        group: String,
        /// The backup's name (lowercase letters, digits, '-'); default `<group>-<UTC time>`.
        #[arg(long)]
        name: Option<String>,
    },
    /// Restore the active site in place from a named backup (writes the restore annotation):
    /// fenced, restored, re-promoted; transactions after the backup are discarded.
    Restore {
        /// The MysqlFailoverGroup.
        group: String,
        /// The backup to restore from (on the active site's volume).
        #[arg(long = "from")]
        from: String,
        /// How: `logical` loads the backup's dump into the running mysqld; `physical` stops
        /// mysqld and replaces its data directory with the backup's `mariadb-backup` copy (the
        /// operator refuses it, saying so, for a backup without one).
        #[arg(long, value_parser = ["logical", "physical"], default_value = "logical")]
        method: String,
    },
    /// Rejoin a fenced returning primary (writes the rejoin annotation): its errant
    /// transactions and a full dump are archived on its backups volume, then it is re-seeded
    /// from the active site and becomes a replica again.
    Rejoin {
        /// The MysqlFailoverGroup.
        group: String,
        /// The fenced site (a demoted old primary holding errant transactions).
        site: String,
    },
}

/// Runs `cli` against `client`; returns what to print.
pub async fn run(cli: &Cli, client: Client) -> Result<String> {
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let groups = cluster::Groups::new(client, namespace);
    match &cli.command {
        Command::Promote { group, site } => promote::run(&groups, group, site).await,
        Command::Status { group } => status::run(&groups, group).await,
        Command::RevokeLeases { group } => revoke_leases::run(&groups, group).await,
        Command::Backup { group, name } => backup::run(&groups, group, name.as_deref()).await,
        Command::Restore {
            group,
            from,
            method,
        } => restore::run(&groups, group, from, method).await,
        Command::Rejoin { group, site } => rejoin::run(&groups, group, site).await,
    }
}
