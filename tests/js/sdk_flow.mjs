// Drives `belt serve` with the official JavaScript SDK, unmodified (tests/test_emulator_js.py).
// Usage: node sdk_flow.mjs BASE_URL gate HOOK_URL | node sdk_flow.mjs BASE_URL client
// Prints one JSON object on stdout: what the application saw.
import { inference } from '@inferencesh/sdk';

const [baseUrl, mode, hookUrl] = process.argv.slice(2);
const client = inference({ apiKey: 'belt-local', baseUrl });
const seen = { messages: [], text: '', chats: [], toolCalls: [], resolved: [] };

function track(options) {
  return {
    onMessage: (message) => seen.messages.push(message),
    onDelta: (delta) => { seen.text += delta.delta.response ?? ''; },
    ...options,
  };
}

if (mode === 'gate') {
  const agent = client.agent({
    name: 'guarded',
    core_app: { ref: 'infsh/claude-sonnet-4@latest' },
    hooks: [
      { event: 'agent.tool_call', type: 'webhook', handler: `${hookUrl}/guard` },
      { event: 'agent.tool_call', type: 'gate', default_resolution: 'deny' },
    ],
  });
  // At a gate the JS SDK keeps listening: resolve it from the chat event that shows the run
  // held there (input_required).
  const first = await agent.sendMessage('clean up the disk', track({
    onChat: async (chat) => {
      seen.chats.push({ status: chat.status, state: chat.active_run?.state ?? null });
      if (chat.active_run?.state !== 'input_required') return;
      for (const gate of chat.pending_interrupts ?? []) {
        if (seen.resolved.includes(gate.id)) continue;
        seen.resolved.push(gate.id);
        await client.agents.resolveInterrupt(gate.id, 'allow');
      }
    },
  }));
  seen.reply = first.assistantMessage;
  // A second message in the same chat: the stream is opened before the POST.
  await agent.sendMessage('thanks', track({}));
  seen.chat = await agent.getChat();
  agent.disconnect();
} else {
  const agent = client.agent({
    name: 'locator',
    tools: [{ name: 'get_location', type: 'client', client: {} }],
  });
  await agent.sendMessage('where am I?', track({
    onToolCall: async (call) => {
      seen.toolCalls.push(call);
      await agent.submitToolResult(call.id, { city: 'Lisbon' });
    },
  }));
  seen.chat = await agent.getChat();
  seen.status = (await client.chats.getStatus(agent.currentChatId)).data;
  agent.disconnect();
}
process.stdout.write(JSON.stringify(seen));
