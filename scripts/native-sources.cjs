// Prints native source paths from native/sources.json for binding.gyp, e.g.
//   node scripts/native-sources.cjs core kernels backends addon
const path = require('node:path');
const lists = require(path.join(__dirname, '..', 'native', 'sources.json'));
const groups = process.argv.slice(2);
const files = groups.flatMap((group) => {
  if (!Array.isArray(lists[group])) throw new Error(`native/sources.json has no list '${group}'`);
  return lists[group];
});
process.stdout.write(files.join(' '));
