// Components are shared by the episodes that affect them; `key` is one property because
// Community has no composite node keys (its layout became org + type + name in 012).
// Skills were unique by name here until 013 gave each org its own skill nodes; a store
// migrated from scratch never creates that constraint, so re-running this file after 013
// cannot fail on two orgs' skills of one name.
CREATE CONSTRAINT component_key IF NOT EXISTS FOR (c:Component) REQUIRE c.key IS UNIQUE;
CREATE INDEX component_type_name IF NOT EXISTS FOR (c:Component) ON (c.type, c.name);
