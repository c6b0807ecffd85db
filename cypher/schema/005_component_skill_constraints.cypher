// Components are shared by the episodes that affect them; `key` is type + U+001F + name, one
// property because Community has no composite node keys. Skills are unique by name.
CREATE CONSTRAINT component_key IF NOT EXISTS FOR (c:Component) REQUIRE c.key IS UNIQUE;
CREATE INDEX component_type_name IF NOT EXISTS FOR (c:Component) ON (c.type, c.name);
CREATE CONSTRAINT skill_name IF NOT EXISTS FOR (s:Skill) REQUIRE s.name IS UNIQUE;
