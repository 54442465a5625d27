// Intentionally empty: see package.json.
module.exports = {};
