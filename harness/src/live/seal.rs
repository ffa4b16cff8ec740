//! The automatic seal ([`Op::SurvivorsHeld`]): right after a fault takes the active site's
//! primary away, what every other site held, read by the harness itself (issue 34 item 2:
//! RPO from the harness's own evidence; docs/design/requirements.md R001.8: the RPO is fixed
//! at the instant the primary died). The survivors checker ([`crate::check::survivors`])
//! judges the emergency failover that follows from it.
//!
//! The reads go through the shared exec of [`crate::playground::install::Installer::sql_as_root`]
//! (never a connection of the harness's own), all survivors at once, each bounded by
//! [`SEAL_READ_MAX`] so the seal is complete well before the operator's detection window
//! (pollInterval x failureThreshold, about 4-6 s in the playground) ends and a promotion can
//! change what the survivors hold.

use std::collections::BTreeMap;
use std::time::Duration;

use bloodraven_api::names;

use super::LiveCluster;
use crate::history::event::{EventType, HeldGtids, Op};
use crate::history::recorder::Recorder;
use crate::playground::names::GROUP;
use crate::scenario::model::{Container, Fault, Partition, Site};

/// How long one survivor's read may take before it is left out (named in `unread`). The
/// detection window of the playground's groups is about 4-6 s; the reads run concurrently.
pub const SEAL_READ_MAX: Duration = Duration::from_secs(3);

/// The process that records seals.
pub const SEAL_PROCESS: &str = "seal";

/// Two result sets, read by column name (through
/// [`crate::playground::install::Installer::sql_as_root_named`]: a header line, then rows, tab
/// separated; an empty result set prints nothing).
///
/// Executed is `@@GLOBAL.gtid_current_pos`: MariaDB 10.11 documents it as "the GTID of the last
/// transaction applied to the database for each replication domain" (the most recent of
/// `gtid_binlog_pos` and `gtid_slave_pos`), so it counts what the replication SQL thread applied
/// whether or not it reached the binlog; `gtid_binlog_pos` is only what was written to the
/// binlog. Being one position per domain, it credits the whole domain to its last writer, which
/// on a survivor replicating from the primary that just died is that primary: exactly the
/// server whose acknowledged writes are looked up in it. A wrong attribution of an older run
/// can only hide a finding, never make one.
///
/// Retrieved is `Gtid_IO_Pos` of every replication connection: the last GTID its IO thread
/// received into the relay log (applied or not).
pub const HELD_QUERY: &str = "SELECT @@GLOBAL.gtid_current_pos AS executed; SHOW ALL SLAVES STATUS";

/// The sites whose primary `fault` takes away, if the site is the active one: the `mysql`
/// container killed or frozen, the pod deleted, the node stopped, or a partition that cuts the
/// site off from the other sites (`sites` and `nodes`; `peers` too, which leaves the primary
/// its clients but takes it away from the survivors, what the RPO is about).
pub fn primary_taken_from(fault: &Fault) -> Vec<Site> {
    match fault {
        Fault::Kill(target) if target.container == Container::Mysql => vec![target.site],
        Fault::Freeze(target) if target.container == Container::Mysql => vec![target.site],
        Fault::DeletePod(target) | Fault::StopNode(target) => vec![target.site],
        Fault::Partition(
            Partition::Sites(sites) | Partition::Nodes(sites) | Partition::Peers(sites),
        ) => sites.clone(),
        Fault::Kill(_)
        | Fault::Freeze(_)
        | Fault::Thaw(_)
        | Fault::StartNode(_)
        | Fault::ClockOffset(_)
        | Fault::SetReadOnly { .. }
        | Fault::ReplicationDelay { .. }
        | Fault::KillOperator { .. }
        | Fault::DenyRbac { .. }
        | Fault::ScaleOperator { .. }
        | Fault::StopExternalDns => Vec::new(),
    }
}

/// Parses [`HELD_QUERY`]'s output (`mariadb -B` with column names): the `executed` result,
/// then, when replicating, `SHOW ALL SLAVES STATUS`'s header and one row per connection, whose
/// `Gtid_IO_Pos` values are joined (none: not replicating, empty). An error names what was
/// missing.
pub fn parse_held(output: &str) -> Result<HeldGtids, String> {
    let shown = || output.chars().take(200).collect::<String>();
    let mut lines = output.lines();
    if lines.next().map(str::trim) != Some("executed") {
        return Err(format!(
            "the answer does not start with the `executed` column: {:?}",
            shown()
        ));
    }
    let executed = lines
        .next()
        .ok_or_else(|| format!("no `executed` value in the answer: {:?}", shown()))?
        .trim()
        .to_owned();
    let mut retrieved: Vec<String> = Vec::new();
    if let Some(header) = lines.next() {
        let column = header
            .split('\t')
            .position(|name| name.trim() == "Gtid_IO_Pos")
            .ok_or_else(|| {
                format!(
                    "no Gtid_IO_Pos column in SHOW ALL SLAVES STATUS: {:?}",
                    shown()
                )
            })?;
        for row in lines {
            let value = row
                .split('\t')
                .nth(column)
                .ok_or_else(|| format!("a replication row has no Gtid_IO_Pos field: {row:?}"))?;
            let value = value.trim();
            if !value.is_empty() && value != "NULL" {
                retrieved.push(value.to_owned());
            }
        }
    }
    Ok(HeldGtids {
        executed,
        retrieved: retrieved.join(","),
    })
}

impl LiveCluster {
    /// The active site as the group's status says right now; when the group cannot be read,
    /// the last one the status probe observed (`None` when neither is known).
    pub(super) async fn active_site_now(&self) -> Option<Site> {
        match self.installer.group().await {
            Ok(group) => match Op::status_of_group(&group) {
                Op::Status { active_site, .. } => active_site,
                _ => None,
            },
            Err(error) => {
                tracing::warn!(%error, "seal: could not read the group's active site; using the last status observed");
                self.history().last_active_site()
            }
        }
    }

    /// What `site` holds now ([`HELD_QUERY`]), bounded by [`SEAL_READ_MAX`].
    async fn held_gtids(&self, site: Site) -> Result<HeldGtids, String> {
        let pod = names::pod(GROUP, site.name());
        match tokio::time::timeout(
            SEAL_READ_MAX,
            self.installer.sql_as_root_named(&pod, HELD_QUERY),
        )
        .await
        {
            Err(_) => Err(format!(
                "the read did not answer within {} ms",
                SEAL_READ_MAX.as_millis()
            )),
            Ok(Err(error)) => Err(error.to_string()),
            Ok(Ok(output)) => parse_held(&output),
        }
    }

    /// Records the seal after `fault` took `active`'s primary away: every other site read at
    /// once; `ok` when all were read, `fail` naming each one that was not and why.
    pub(super) async fn seal_survivors(&self, fault: &Fault, active: Site, recorder: &Recorder) {
        let trigger = format!(
            "{} {}",
            fault.kind(),
            serde_json::to_string(fault).unwrap_or_default()
        );
        let op = |sites, unread| Op::SurvivorsHeld {
            trigger: trigger.clone(),
            active,
            sites,
            unread,
        };
        recorder.invoke(SEAL_PROCESS, op(BTreeMap::new(), BTreeMap::new()));
        // The playground has three sites (Site::ALL): the two other than the active one are
        // read concurrently; the active one is not read.
        const _: () = assert!(Site::ALL.len() == 3);
        let read = |site: Site| async move {
            if site == active {
                None
            } else {
                Some((site, self.held_gtids(site).await))
            }
        };
        let (first, second, third) =
            tokio::join!(read(Site::ALL[0]), read(Site::ALL[1]), read(Site::ALL[2]));
        let mut sites = BTreeMap::new();
        let mut unread = BTreeMap::new();
        for (site, answer) in [first, second, third].into_iter().flatten() {
            match answer {
                Ok(held) => {
                    sites.insert(site, held);
                }
                Err(why) => {
                    unread.insert(site, why);
                }
            }
        }
        let kind = if unread.is_empty() {
            EventType::Ok
        } else {
            tracing::warn!(?unread, %active, "seal: survivors left out");
            EventType::Fail
        };
        recorder.complete(SEAL_PROCESS, kind, op(sites, unread));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::{ContainerRef, KillTarget, SiteRef};

    // issue 34 item 2: the seal reads the executed set and the relay log's received position by
    // column name.
    #[test]
    fn held_sets_are_read_by_column_name() {
        let output = "executed\n0-1-97\n\
                      Connection_name\tSlave_SQL_State\tMaster_Host\tGtid_IO_Pos\tRetried_transactions\n\
                      \tSlave has read all relay log\tiad\t0-1-100\t0\n";
        let held = parse_held(output).expect("parsed");
        assert_eq!(held.executed, "0-1-97");
        assert_eq!(held.retrieved, "0-1-100");
        // Not replicating: no rows and no header, empty retrieved; an empty executed set stays
        // empty.
        let alone = parse_held("executed\n\n").expect("parsed");
        assert_eq!(
            (alone.executed.as_str(), alone.retrieved.as_str()),
            ("", "")
        );
        assert!(parse_held("ERROR 2002").is_err());
        assert!(parse_held("executed\n0-1-5\nConnection_name\tMaster_Host\n\tiad\n").is_err());
    }

    // The answer of a real MariaDB 10.11.19 (`mariadb -B`) replicating with GTIDs from
    // slave_pos 0-1-100 (its IO thread failing to connect: the relay log's position stays):
    // 62 columns, Gtid_IO_Pos the 46th, next to Gtid_Slave_Pos.
    #[test]
    fn a_real_mariadb_answer_is_read() {
        const ANSWER: &str = "executed\n0-1-100\nConnection_name\tSlave_SQL_State\tSlave_IO_State\tMaster_Host\tMaster_User\tMaster_Port\tConnect_Retry\tMaster_Log_File\tRead_Master_Log_Pos\tRelay_Log_File\tRelay_Log_Pos\tRelay_Master_Log_File\tSlave_IO_Running\tSlave_SQL_Running\tReplicate_Do_DB\tReplicate_Ignore_DB\tReplicate_Do_Table\tReplicate_Ignore_Table\tReplicate_Wild_Do_Table\tReplicate_Wild_Ignore_Table\tLast_Errno\tLast_Error\tSkip_Counter\tExec_Master_Log_Pos\tRelay_Log_Space\tUntil_Condition\tUntil_Log_File\tUntil_Log_Pos\tMaster_SSL_Allowed\tMaster_SSL_CA_File\tMaster_SSL_CA_Path\tMaster_SSL_Cert\tMaster_SSL_Cipher\tMaster_SSL_Key\tSeconds_Behind_Master\tMaster_SSL_Verify_Server_Cert\tLast_IO_Errno\tLast_IO_Error\tLast_SQL_Errno\tLast_SQL_Error\tReplicate_Ignore_Server_Ids\tMaster_Server_Id\tMaster_SSL_Crl\tMaster_SSL_Crlpath\tUsing_Gtid\tGtid_IO_Pos\tReplicate_Do_Domain_Ids\tReplicate_Ignore_Domain_Ids\tParallel_Mode\tSQL_Delay\tSQL_Remaining_Delay\tSlave_SQL_Running_State\tSlave_DDL_Groups\tSlave_Non_Transactional_Groups\tSlave_Transactional_Groups\tReplicate_Rewrite_DB\tRetried_transactions\tMax_relay_log_size\tExecuted_log_entries\tSlave_received_heartbeats\tSlave_heartbeat_period\tGtid_Slave_Pos\n\t\t\t127.0.0.1\t\t1\t60\t\t4\tvm-relay-bin.000001\t4\t\tNo\tNo\t\t\t\t\t\t\t0\t\t0\t4\t256\tNone\t\t0\tNo\t\t\t\t\t\tNULL\tNo\t1593\tFatal error: Invalid (empty) username when attempting to connect to the master server. Connection attempt terminated.\t0\t\t\t0\t\t\tSlave_Pos\t0-1-100\t\t\toptimistic\t0\tNULL\t\t0\t0\t0\t\t0\t1073741824\t0\t0\t30.000\t0-1-100\n";
        let held = parse_held(ANSWER).expect("parsed");
        assert_eq!(held.executed, "0-1-100");
        assert_eq!(held.retrieved, "0-1-100");
    }

    #[test]
    fn faults_that_take_a_primary_away_name_its_site() {
        let kill = |container| {
            Fault::Kill(KillTarget {
                site: Site::Iad,
                container,
                keep_down: true,
            })
        };
        assert_eq!(primary_taken_from(&kill(Container::Mysql)), [Site::Iad]);
        assert!(primary_taken_from(&kill(Container::Sidecar)).is_empty());
        let freeze = Fault::Freeze(ContainerRef {
            site: Site::Pdx,
            container: Container::Mysql,
        });
        assert_eq!(primary_taken_from(&freeze), [Site::Pdx]);
        let stop = Fault::StopNode(SiteRef { site: Site::Iad });
        assert_eq!(primary_taken_from(&stop), [Site::Iad]);
        let partition = Fault::Partition(Partition::Sites(vec![Site::Iad, Site::Reader]));
        assert_eq!(primary_taken_from(&partition), [Site::Iad, Site::Reader]);
        assert!(primary_taken_from(&Fault::StopExternalDns).is_empty());
    }
}
