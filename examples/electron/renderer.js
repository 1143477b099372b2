// Renderer: no Node.js here, only the function preload.cjs exposed.
const button = document.getElementById('run');
const result = document.getElementById('result');

button.addEventListener('click', async () => {
  const input = Array.from({ length: 32 }, () => Math.random() * 2 - 1);
  try {
    const { code, reconstruction, milliseconds } = await window.etna.encodeDecode(input);
    const format = (values) => values.map((value) => value.toFixed(3)).join(' ');
    result.textContent = [
      `code (8):            ${format(code)}`,
      `input[0..7]:         ${format(input.slice(0, 8))}`,
      `reconstruction[0..7]: ${format(reconstruction.slice(0, 8))}`,
      `${milliseconds.toFixed(2)} ms`,
    ].join('\n');
  } catch (error) {
    result.textContent = String(error);
  }
});
