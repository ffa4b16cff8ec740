//! Application users never get privileges that bypass read_only (docs/design/architecture.md#mysql:
//! no global ALL, no SUPER, no READ_ONLY ADMIN; otherwise fencing is a lie).

use bloodraven_mysql::grants::{
    app_user_grant, create_app_user, read_only_bypasses, APP_USER_PRIVILEGES,
};
use bloodraven_mysql::Flavor;

const FLAVORS: [Flavor; 2] = [Flavor::MariaDb, Flavor::MySql];

#[test]
fn app_user_grant_is_database_level_only() {
    let grant = app_user_grant("counter", "app", "%");
    let Ok(grant) = grant else {
        panic!("{grant:?}");
    };
    assert_eq!(
        grant,
        format!(
            "GRANT {} ON `counter`.* TO 'app'@'%'",
            APP_USER_PRIVILEGES.join(", ")
        )
    );
    for forbidden in [
        "SUPER",
        "READ_ONLY",
        "ALL",
        "*.*",
        "CONNECTION_ADMIN",
        "GRANT OPTION",
    ] {
        assert!(!grant.contains(forbidden), "{forbidden} in {grant}");
    }
    // The builder's own output passes the check for both flavors.
    for flavor in FLAVORS {
        assert_eq!(read_only_bypasses(flavor, &[&grant]), []);
    }
}

#[test]
fn app_user_grant_escapes_wildcards_quotes_and_backquotes() {
    assert_eq!(
        app_user_grant("my_app%db", "o'brien", "10.%")
            .map(|g| g.split_once(" ON ").map(|(_, rest)| rest.to_string())),
        Ok(Some(r"`my\_app\%db`.* TO 'o''brien'@'10.%'".to_string()))
    );
    assert_eq!(
        app_user_grant("we`ird", "app", "%").map(|g| g.contains("`we``ird`.*")),
        Ok(true)
    );
    for (database, user, host) in [("", "app", "%"), ("db", "", "%"), ("d\\b", "a", "%")] {
        assert!(
            app_user_grant(database, user, host).is_err(),
            "{database:?} {user:?}"
        );
    }
    assert_eq!(
        create_app_user("app", "%", r"s3cr'et\"),
        Ok(r"CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 's3cr''et\\'".to_string())
    );
}

// SHOW GRANTS recorded from MariaDB 10.11.19. There, `app` (made with create_app_user and
// app_user_grant) got error 1290 writing to the fenced server, while `bad` (SUPER, READ_ONLY
// ADMIN) wrote through read_only: exactly what the check must flag.
#[test]
fn recorded_mariadb_show_grants() {
    let app = [
        "GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*D7DF95B01EACA4BBF609F3586649A423A2E70A7E'",
        "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, REFERENCES, INDEX, ALTER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, EVENT, TRIGGER ON `counter`.* TO `app`@`%`",
    ];
    assert_eq!(read_only_bypasses(Flavor::MariaDb, &app), []);
    let bad = [
        "GRANT `r1` TO `bad`@`%`",
        "GRANT SUPER, READ_ONLY ADMIN ON *.* TO `bad`@`%` IDENTIFIED BY PASSWORD '*B69027D44F6E5EDC07F1AEAD1477967B16F28227'",
        "GRANT ALL PRIVILEGES ON `counter`.* TO `bad`@`%`",
        "GRANT USAGE ON *.* TO `r1`",
        "GRANT SELECT ON `counter`.* TO `r1`",
    ];
    let privileges: Vec<String> = read_only_bypasses(Flavor::MariaDb, &bad)
        .into_iter()
        .map(|finding| finding.privilege)
        .collect();
    assert_eq!(privileges, ["SUPER", "READ_ONLY ADMIN"]);
    let replication = ["GRANT REPLICATION SLAVE ON *.* TO `repl`@`%` IDENTIFIED BY PASSWORD '*0EC5CFEB141AF1EE765823C3DE3215828E0D4610'"];
    assert_eq!(read_only_bypasses(Flavor::MariaDb, &replication), []);
}

// MariaDB 10.11 SHOW GRANTS outputs (root recorded from 10.11.19).
#[test]
fn mariadb_show_grants_bypasses_are_flagged() {
    let root = [
        "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION",
        "GRANT PROXY ON ``@`%` TO `root`@`localhost` WITH GRANT OPTION",
    ];
    let findings = read_only_bypasses(Flavor::MariaDb, &root);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].privilege, "ALL PRIVILEGES");
    assert_eq!(findings[0].line, root[0]);

    let app_ok = [
        "GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*6BB4837EB74329105EE4568DDA7DC67ED2CA2AD9'",
        "GRANT ALL PRIVILEGES ON `counter`.* TO `app`@`%`",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON `counter`.`events` TO `app`@`%`",
    ];
    assert_eq!(read_only_bypasses(Flavor::MariaDb, &app_ok), []);

    let app_bad = [
        "GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*6BB4837EB74329105EE4568DDA7DC67ED2CA2AD9'",
        "GRANT RELOAD, READ_ONLY ADMIN ON *.* TO `app`@`%`",
        "GRANT SUPER ON *.* TO `app`@`%`",
    ];
    let privileges: Vec<String> = read_only_bypasses(Flavor::MariaDb, &app_bad)
        .into_iter()
        .map(|finding| finding.privilege)
        .collect();
    assert_eq!(privileges, ["READ_ONLY ADMIN", "SUPER"]);
}

// Recorded MySQL 8.4 SHOW GRANTS outputs (dynamic privileges on their own line, no spaces).
#[test]
fn mysql_show_grants_bypasses_are_flagged() {
    let app_bad = [
        "GRANT USAGE ON *.* TO `app`@`%`",
        "GRANT BACKUP_ADMIN,CONNECTION_ADMIN,SYSTEM_VARIABLES_ADMIN ON *.* TO `app`@`%`",
        "GRANT SELECT (`id`, `value`), INSERT ON `counter`.`counter` TO `app`@`%`",
    ];
    let privileges: Vec<String> = read_only_bypasses(Flavor::MySql, &app_bad)
        .into_iter()
        .map(|finding| finding.privilege)
        .collect();
    assert_eq!(privileges, ["CONNECTION_ADMIN", "SYSTEM_VARIABLES_ADMIN"]);
    // READ_ONLY ADMIN is MariaDB's; CONNECTION_ADMIN is MySQL's.
    assert_eq!(
        read_only_bypasses(
            Flavor::MariaDb,
            &["GRANT CONNECTION_ADMIN ON *.* TO `a`@`%`"]
        ),
        []
    );
    assert_eq!(
        read_only_bypasses(
            Flavor::MySql,
            &["GRANT ALL PRIVILEGES ON *.* TO `a`@`%` WITH GRANT OPTION"]
        )
        .len(),
        1
    );
    // Quoted names that contain the keywords do not confuse the parser.
    assert_eq!(
        read_only_bypasses(
            Flavor::MySql,
            &["GRANT SELECT ON `x ON *.* TO y`.* TO `app`@`%`"]
        ),
        []
    );
}

// A granted role hides its privileges; it is flagged until its own grants are shown.
#[test]
fn roles_are_flagged_until_their_grants_are_shown() {
    let user = [
        "GRANT USAGE ON *.* TO `app`@`%`",
        "GRANT `app_role` TO `app`@`%`",
    ];
    let findings = read_only_bypasses(Flavor::MariaDb, &user);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].privilege, "`app_role`");

    let with_role = [
        user[0],
        user[1],
        "GRANT SELECT, INSERT ON `counter`.* TO `app_role`",
    ];
    assert_eq!(read_only_bypasses(Flavor::MariaDb, &with_role), []);

    let bad_role = [user[0], user[1], "GRANT SUPER ON *.* TO `app_role`"];
    assert_eq!(read_only_bypasses(Flavor::MariaDb, &bad_role).len(), 1);
}
