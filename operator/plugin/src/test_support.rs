//! What the subcommands' unit tests share.

use bloodraven_api::{MysqlFailoverGroup, MysqlFailoverGroupSpec};

/// The playground's group: iad and pdx read-write, reader read-only, iad initially active.
pub(crate) fn playground() -> MysqlFailoverGroup {
    let spec: MysqlFailoverGroupSpec = serde_yaml::from_str(
        "image: mariadb:10.11\nsites:\n- {name: iad, role: read-write}\n- {name: pdx, role: read-write}\n- {name: reader, role: read-only}\ninitialActiveSite: iad\n",
    )
    .expect("playground spec");
    let mut group = MysqlFailoverGroup::new("playground", spec);
    group.metadata.namespace = Some("bloodraven-playground".into());
    group
}
