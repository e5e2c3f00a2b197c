import { GatewayClient } from '@auth-gateway/client';
const gateway = new GatewayClient({ baseUrl: 'https://gateway.example.com', credentials: { apiKey: process.env.API_KEY!, apiSecret: process.env.API_SECRET! } });
console.log(await gateway.sign('0x52908400098527886E0F7030069857D2E4169EE7'));
